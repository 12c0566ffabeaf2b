"""The static HTML page (no widget manager, or an export) folds a pass's repeated layers as the
widget does: one ``<details>`` per fold, its summary the fold line, every string escaped."""
from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest

pytest.importorskip("anywidget")

from fold_fixtures import write_layer_trace_recording  # noqa: E402
from thundervis.notebook_ext import show  # noqa: E402
from thundervis.notebook_ext.static_html import _folded  # noqa: E402
from thundervis.present.pass_traces import PassTraces  # noqa: E402
from thundervis.present.trace_folds import fold_line, pass_folds  # noqa: E402
from thundervis.present.trace_lines import pass_lines  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402


class _Trace(HTMLParser):
    """The trace's text, split into what is shown and what a closed fold hides, and the folds'
    summaries."""

    def __init__(self):
        super().__init__()
        self.depth, self.in_pre, self.in_fold, self.in_summary = 0, False, 0, False
        self.shown, self.hidden, self.summaries = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "pre" and a.get("class") == "tv-trace":
            self.in_pre = True
        elif self.in_pre and tag == "details" and a.get("class") == "tv-fold":
            self.in_fold += 1
        elif self.in_fold and tag == "summary":
            self.in_summary = True
            self.summaries.append("")

    def handle_endtag(self, tag):
        if tag == "pre":
            self.in_pre = False
        elif tag == "details" and self.in_fold:
            self.in_fold -= 1
        elif tag == "summary":
            self.in_summary = False

    def handle_data(self, data):
        if self.in_summary:
            self.summaries[-1] += data
        elif self.in_pre:
            (self.hidden if self.in_fold else self.shown).append(data)


def test_the_static_trace_folds_its_layers_behind_the_fold_line(tmp_path):
    path = write_layer_trace_recording(str(tmp_path / "six.tvrec"))
    with open_recording(path) as rec:
        traces = PassTraces(rec, size=None)
        (fold,) = pass_folds(traces, 0, "forward", 0)
        texts = [ln.text for ln in pass_lines(traces, 0, "forward", 0)]
    page = show(path, chain="forward")._repr_html_()  # the last pass: unchanged, it shows pass 0's trace
    parsed = _Trace()
    parsed.feed(page)
    assert page.count('<details class="tv-fold">') == 1
    # the summary holds the closed and the open fold line (CSS shows one)
    assert parsed.summaries == [fold_line(fold).text + fold_line(fold, True).text]
    shown, hidden = "".join(parsed.shown), "".join(parsed.hidden)
    assert "[model.layers.0]" in shown and "[model.head]" in shown
    for i in range(1, 6):
        assert f"[model.layers.{i}]" in hidden and f"[model.layers.{i}]" not in shown
    assert "[model.layers.0]" not in hidden
    # nothing is lost: the shown and hidden lines, in order, are the whole trace
    assert hidden == "\n".join(texts[fold.start:fold.end])
    # no newline next to the <details> (a block starts its own line, a newline there is a blank line)
    assert shown == "\n".join(texts[:fold.start]) + "\n".join(texts[fold.end:])


def test_folds_are_escaped_and_bad_ones_leave_the_lines_shown():
    rows = [f"<span>{i}</span>" for i in range(6)]
    out = _folded(rows, [{"start": 1, "end": 3, "line": "<script>x</script>", "open_line": "\x1b[31m&"}])
    assert "<script>" not in out and html.escape("<script>") in out and "\x1b" not in out
    assert out.startswith(rows[0] + "<details") and out.endswith("</details>" + "\n".join(rows[3:]))
    for bad in ({"start": 3, "end": 2}, {"start": 0, "end": 99}, {"start": "0", "end": 2}, "fold", None,
                {"start": -1, "end": 2}):
        assert _folded(rows, [bad]) == "\n".join(rows), bad
    # overlapping folds: the second is left out
    out = _folded(rows, [{"start": 1, "end": 4, "line": "a", "open_line": "b"},
                         {"start": 2, "end": 5, "line": "c", "open_line": "d"}])
    assert out.count("<details") == 1
