"""The widget's Memory tab on the Python side (issue 38): the static HTML page shows the memory
section (present.memory's peak line, matplotlib's timeline as a data: ``<img>``), a recording made
before the ledger says "not recorded in this recording (made by an older version)", recorded text
in the section is escaped, and ``show(tab="memory")`` opens on it."""
from __future__ import annotations

import base64
import shutil
import sqlite3

import pytest

pytest.importorskip("anywidget")
pytest.importorskip("matplotlib")

from thundervis.notebook_ext import DataError, show  # noqa: E402
from thundervis.notebook_ext.static_html import memory_html  # noqa: E402
from thundervis.present.memory import NOT_RECORDED  # noqa: E402

from notebook_helpers import HtmlTags  # noqa: E402

LEDGER_TABLES = ("memory_graphs", "memory_saved", "memory_decisions", "memory_timeline", "memory_peaks")
PLOT_ALT = "live bytes over the step, forward then backward, the peak marked"


def _parse(page: str) -> HtmlTags:
    parser = HtmlTags()
    parser.feed(page)
    return parser


def test_static_page_shows_the_memory_section_with_peak_line_and_plot(hostile):
    w = show(hostile, tab="memory")
    assert w.tab == "memory"
    mem = w.data["memory"]
    assert mem["recorded"] and mem["peak_line"].startswith("memory peak: static")
    page = w._repr_html_()
    parser = _parse(page)
    assert parser.handlers == []
    assert "<h4>memory</h4>" in page
    assert mem["peak_line"] in "".join(parser.texts)
    (img,) = [a for t, a in parser.tags if t == "img" and a.get("alt") == PLOT_ALT]
    prefix = "data:image/svg+xml;base64,"
    assert img["src"].startswith(prefix)
    svg = base64.b64decode(img["src"][len(prefix):]).decode("utf-8")
    assert svg == mem["svg"] and 'id="peak"' in svg
    assert "<svg" not in page  # the SVG is never inlined as markup


def test_static_page_of_an_old_recording_says_memory_was_not_recorded(hostile, tmp_path):
    path = str(tmp_path / "old.tvrec")
    shutil.copy(hostile, path)
    with sqlite3.connect(path) as c:
        for t in LEDGER_TABLES:
            c.execute(f"DROP TABLE {t}")
    w = show(path)
    assert w.data["memory"] == {"recorded": False, "message": NOT_RECORDED, "peak_line": "", "svg": None}
    page = w._repr_html_()
    assert f'<h4>memory</h4><p class="tv-muted">{NOT_RECORDED}</p>' in page
    assert not [a for t, a in _parse(page).tags if t == "img" and a.get("alt") == PLOT_ALT]


def test_memory_section_escapes_text_and_says_when_there_is_no_plot():
    hostile = '<img src=x onerror=alert(1)>\x1b[2J\u202e'
    page = memory_html({"recorded": True, "message": "", "peak_line": hostile, "svg": None})
    assert "<img src=x" not in page and "\x1b" not in page and "\u202e" not in page
    assert "&lt;img src=x" in page and "no timeline plot" in page
    old = memory_html({"recorded": False, "message": hostile, "peak_line": "", "svg": None})
    assert "<img src=x" not in old and "&lt;img src=x" in old
    assert memory_html(None) == ""  # a payload without the key (an older widget's): no section


def test_show_rejects_an_unknown_tab(hostile):
    with pytest.raises(DataError, match="'memory'"):
        show(hostile, tab="memroy")
