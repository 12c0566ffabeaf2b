"""Pilot tests: communication in the TUI. Communication ops traced into a graph are styled as such
in the trace view and explained in the details pane; the collectives run between graphs are
counted in the top bar and listed per place on the communication screen (m); a run without any
shows none of it."""
from __future__ import annotations

import pytest
from tui_helpers import details_for, open_app, screen_text, settle, wait_for

from thundervis.present.collectives import describe
from thundervis.recording import open_recording
from thundervis.recording.collectives import collectives


def _comm_line(app) -> int:
    return next(i for i, t in enumerate(app.query_one("LinesView").texts) if "_c10d_functional.all_reduce" in t)


@pytest.mark.asyncio
async def test_communication_ops_are_marked_and_explained(comm_rec):
    from thundervis.tui import styling
    app = open_app(comm_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        line = _comm_line(app)
        drawn = styling.trace_line(app.trace.lines[line])
        assert drawn.plain.startswith(styling.COMM_MARK) and drawn.style == styling.S_COMM_ROW
        wait = next(ln for ln in app.trace.lines if "wait_tensor" in ln.text)
        assert styling.trace_line(wait).plain.startswith(styling.COMM_MARK)
        plain = [ln for ln in app.trace.lines if "aten.mul" in ln.text and ln.kind == "stmt"]
        assert plain and not styling.trace_line(plain[0]).plain.startswith(styling.COMM_MARK)
        view.move_cursor(line)
        text = await details_for(app, pilot)
        assert "communication" in text and "a collective (all_reduce) traced into this graph" in text
        assert "runs on torch as an opaque collective, never fused across" in text  # present.collectives.CLAIM_NOTE
        assert text.count("never fused across") == 1  # the claim note is not repeated as a "why"
        view.move_cursor(_comm_line(app) + 1)
        assert "waits for a collective's result" in await details_for(app, pilot)


@pytest.mark.asyncio
async def test_collectives_between_graphs_are_counted_and_listed(comm_rec):
    with open_recording(comm_rec) as rec:
        rows = collectives(rec)
    app = open_app(comm_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert "comm 5 between graphs" in str(app.query_one("#topbar").render())
        await pilot.press("m")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommunicationScreen" and app.screen.loaded)
        text = screen_text(app)
        assert "4 communication ops" in text  # forward and backward: an all_reduce and its wait each
        assert "5 collectives run eagerly between the compiled graphs, 3 listed below" in text
        assert "between graph 0 backward and graph 0 forward: 4 × all_reduce (4.0 KiB)" in text
        reducer = text.index("\nbetween graph 0 backward and graph 0 forward\n")
        end = text.index("\nafter graph 0 backward, at the end of the run\n")
        assert reducer < end
        assert text.count(describe(rows[0])) == 2 and "by backward (DDP reducer)" in text
        assert "barrier · group of 2" in text[end:] and "by the script at ddp_model.py:40" in text[end:]
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ != "CommunicationScreen"


@pytest.mark.asyncio
async def test_the_palette_and_help_list_the_communication_screen(comm_rec):
    from thundervis.tui.palette import palette_entries
    from thundervis.tui.screens import HELP
    app = open_app(comm_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        entry = next(e for e in palette_entries(app) if e[0] == "Communication")
        entry[2]()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommunicationScreen" and app.screen.loaded)
    assert any(key == "m" for _, keys in HELP for key, _ in keys)


@pytest.mark.asyncio
async def test_a_run_without_collectives_shows_no_communication(small_rec):
    from thundervis.tui import styling
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert "comm" not in str(app.query_one("#topbar").render())
        assert not any(styling.trace_line(ln).plain.startswith(styling.COMM_MARK) for ln in app.trace.lines)
        await pilot.press("m")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommunicationScreen" and app.screen.loaded)
        assert "no collective in this run" in screen_text(app)


def test_recorded_text_is_made_visible_on_the_communication_screen(tmp_path):
    from thundervis.recording import RecordingObserver
    from thundervis.tui.comm_screen import communication_text
    from thundervis.tui.data import open_data
    path = str(tmp_path / "t.tvrec")
    obs = RecordingObserver(path)
    obs.start_run(script="x.py", module=None, argv=["x.py"], cwd=str(tmp_path))
    obs.note("collective", {"seq": 0, "op": "all_reduce\x1b[31m", "group_size": 2, "bytes": 8, "step": 1,
                            "after": {"graph": 0, "chain": "back\x07ward", "call": 1}, "issuer": "script",
                            "source": "x.py:3\x1b]0;title\x07"})
    obs.finish_run("ok", 0)
    obs.close()
    data = open_data(path)
    try:
        info = data.communication()
        text = communication_text(info).plain
    finally:
        data.close()
    assert not info.empty and info.counts.between_graphs == 1 and not info.counts.complete
    assert "\x1b" not in text and "\x07" not in text
    assert "after graph 0 back" in text and "all_reduce" in text and "no summary of the run" in text
