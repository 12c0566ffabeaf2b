"""Communication in the widget: ops traced into a graph are marked in the trace lines, the
collectives run between compiled graphs come per place in the payload (from the row model of
thundervis.recording.collectives), in the static page (escaped) and as notes on the diagram."""
from __future__ import annotations

import html

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext import RecordingData, show  # noqa: E402
from thundervis.notebook_ext.static_html import recording_html  # noqa: E402
from thundervis.present.collectives import describe  # noqa: E402
from thundervis.present.units import format_ms  # noqa: E402
from thundervis.recording import RecordingObserver, open_recording  # noqa: E402
from thundervis.recording.collectives import collectives  # noqa: E402

from notebook_helpers import COMM_FILE, HtmlTags  # noqa: E402

HOSTILE_OP = "<script>window.__tv_pwned=9</script>"
HOSTILE_CHAIN = '<img src=x onerror="window.__tv_pwned=10">'


def _last_lines(payload, kind):
    g = payload["graphs"][0]
    c = next(c for c in g["chains"] if c["kind"] == kind)
    held = c["passes"][-1]["same_as"] if c["passes"][-1]["same_as"] is not None else c["passes"][-1]["index"]
    return [payload["lines"][i] for i in c["lines"][str(held)]]


def test_payload_marks_traced_communication_ops_and_lists_collectives_per_place(comm_recording):
    with open_recording(comm_recording) as rec:
        payload = RecordingData(rec).payload(with_diagrams=False)
        rows = collectives(rec)
    infos = payload["infos"]
    fwd = [infos[info] for _, _, _, info, *_ in _last_lines(payload, "forward") if info is not None]
    comm_syms = [i["sym"] for i in fwd if i["comm"]]
    assert comm_syms == ["_c10d_functional.all_reduce.default", "_c10d_functional.wait_tensor.default"]
    assert all(not i["comm"] for i in fwd if not i["sym"].startswith("_c10d_functional."))
    assert any(not i["comm"] for i in fwd)

    comm = payload["communication"]
    assert comm["in_traces"] == 4  # all_reduce + wait in the forward and in the backward
    assert comm["counts"]["between_graphs"] == 3 and comm["counts"]["complete"]
    assert comm["header"] == "comm: 4 in graphs · 3 between graphs"
    assert comm["note"] == "communication op: runs on torch as an opaque collective, never fused across"
    # per place, in the order they ran: the loss's all_reduce after step 1's backward (before
    # step 2's forward), then step 2's all_reduce and the barrier, after the last backward
    assert [p["where"] for p in comm["places"]] == ["between graph 0 backward and graph 0 forward",
                                                    "after graph 0 backward, at the end of the run"]
    listed = [r for p in comm["places"] for r in p["rows"]]
    assert [r["op"] for r in listed] == ["all_reduce", "all_reduce", "barrier"]
    assert [r["seq"] for r in listed] == [r.seq for r in rows] == sorted(r["seq"] for r in listed)
    for r, row in zip(listed, rows):
        assert r["text"] == describe(row)
        assert r["duration_text"] == format_ms(row.duration_ms)  # as describe() and the CLI write it
        assert r["group_size"] == 1 and r["issued_by"] == "script" and r["source"].startswith(COMM_FILE + ":")
    assert listed[0]["bytes"] == 4 and listed[0]["bytes_text"] == "4 B"
    assert dict((op, n) for op, n, _ in comm["by_op"]) == {"all_reduce": 2, "barrier": 1}
    assert "between graph 0 backward and graph 0 forward: 1 × all_reduce (4 B)" in comm["run_places"]


def test_recording_without_collectives_has_no_communication(hostile):
    with open_recording(hostile) as rec:
        payload = RecordingData(rec).payload(with_diagrams=False)
    assert payload["communication"] is None
    assert not any(i.get("comm") for i in payload["infos"])
    page = show(hostile)._repr_html_()
    assert "communication" not in page.lower()


def test_static_page_marks_communication_and_escapes_it(comm_recording):
    assert show(comm_recording, tab="comm").tab == "comm"  # the widget can open on its Communication tab
    page = show(comm_recording, chain="forward")._repr_html_()
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    text = "".join(parser.texts)
    assert "communication · comm: 4 in graphs · 3 between graphs" in text
    assert "between graph 0 backward and graph 0 forward · 1 collective" in text
    assert "after graph 0 backward, at the end of the run · 2 collectives" in text
    assert COMM_FILE + ":" in text and COMM_FILE not in page  # shown as text, never as markup
    marked = [a for t, a in parser.tags if t == "span" and a.get("class") == "tv-comm"]
    assert len(marked) >= 3  # the all_reduce and its wait in the trace, the legend's mark
    assert any("never fused across" in a.get("title", "") for a in marked)
    assert any("⇄ " in t and "_c10d_functional.all_reduce" in t for t in parser.texts)  # marked in the text too


def test_hostile_strings_in_collective_events_are_escaped(tmp_path):
    path = str(tmp_path / "hostile_comm.tvrec")
    obs = RecordingObserver(path)
    obs.start_run(script="x.py", module=None, argv=["x.py"], cwd=str(tmp_path))
    obs.note("collective", {"seq": 0, "op": HOSTILE_OP, "c10d_op": "allreduce_", "group_size": 2, "bytes": 64,
                            "step": 1, "after": {"graph": 0, "chain": HOSTILE_CHAIN, "call": 1}, "before": None,
                            "issuer": "script", "source": "x.py:3"})
    obs.note("collective_summary", {"between_graphs": 5, "by_op": [{"op": HOSTILE_OP, "count": 5, "bytes": 320}],
                                    "places": [{"after": {"graph": 0, "chain": HOSTILE_CHAIN}, "before": None,
                                                "op": HOSTILE_OP, "count": 5, "bytes": 320}]})
    obs.finish_run("ok", 0)
    obs.close()
    with open_recording(path) as rec:
        data = RecordingData(rec)
        payload = data.payload()
    comm = payload["communication"]
    assert comm["places"][0]["where"] == f"after graph 0 {HOSTILE_CHAIN}, at the end of the run"
    assert comm["places"][0]["rows"][0]["op"] == HOSTILE_OP and comm["counts"]["between_graphs"] == 5
    page = recording_html(payload, 0, "forward", 0)
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == [] and "script" not in {t for t, _ in parser.tags}
    text = "".join(parser.texts)
    assert HOSTILE_OP in text and HOSTILE_CHAIN in text
    assert HOSTILE_OP not in page and HOSTILE_CHAIN not in page and html.escape(HOSTILE_OP) in page


def test_diagram_gets_the_communication_notes(comm_recording, monkeypatch):
    import thundervis.dot as dot
    # draw the DOT source instead of running Graphviz (not on every machine): the notes are in it
    monkeypatch.setattr(dot, "trace_to_svg", lambda trace, **options: dot.trace_to_dot(trace, **options))
    with open_recording(comm_recording) as rec:
        data = RecordingData(rec)
        backward = data.diagram(0, "backward")["svg"]
        forward = data.diagram(0, "forward")["svg"]
    # after the first backward call: the script's all_reduce of the loss (the next one is after call 2)
    assert "run eagerly after this chain" in backward and "all_reduce · group of 1 · f32[] · 4 B" in backward
    assert "run eagerly before" not in backward
    # the forward's first call ran first: nothing before it, its backward right after it
    assert "run eagerly" not in forward
    assert "communication" in forward  # the traced all_reduce and its wait, in the legend
