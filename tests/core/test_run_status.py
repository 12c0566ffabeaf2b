"""present.run_status: how a run ended, worded once for ls, the TUI and the widget."""
from __future__ import annotations

from types import SimpleNamespace

from thundervis.present.run_status import NO_GRAPH, NO_GRAPH_YET, run_status


def _run(status, exit_code=None, traceback=None):
    return SimpleNamespace(status=status, exit_code=exit_code, traceback=traceback)


def test_each_end_in_one_wording():
    ok = run_status(_run("ok", 0), 2)
    assert (ok.label, ok.text, ok.ended, ok.no_graph) == ("run ok", "ok (exit 0)", "", "")
    live = run_status(_run("running"), 0)
    assert (live.label, live.text, live.ended, live.no_graph) == ("recording live", "running", "", NO_GRAPH_YET)
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 3\nZeroDivisionError: division by zero\n"
    failed = run_status(_run("failed", 1, tb), 0)
    assert failed.ended == "the script failed (exit 1): ZeroDivisionError: division by zero"
    assert failed.no_graph == NO_GRAPH == "no graph was compiled in this run" and failed.text == "failed (exit 1)"
    killed = run_status(_run("killed"), 1)
    assert killed.ended == "the script killed" and killed.as_json()["exit_code"] is None
    assert run_status(_run("ok", True), 1).exit_code is None  # recorded values are validated, not trusted
