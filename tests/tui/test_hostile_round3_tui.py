"""Hostile recordings, round three, in the TUI through Pilot (issue 41): a trace JSON of 60 million
tiny objects and a recorded source of 250 MiB of newlines. The app paints, the part reads "too
large to show", the Source screen loads (the code lines the symbols carry), and ``q`` quits at once."""
from __future__ import annotations

import os
import sys
import time

import pytest

pytest.importorskip("textual")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from _synthetic_recording import write_recording  # noqa: E402
from test_hostile_round3 import json_bomb, source_newlines  # noqa: E402
from tui_helpers import open_app, settle  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("round3_tui") / "base.tvrec")
    write_recording(path, n_symbols=40)
    return path


async def _quits_fast(app, pilot) -> None:
    t = time.monotonic()
    await pilot.press("q")
    for _ in range(200):
        await pilot.pause(0.02)
        if not app.is_running:
            break
    assert time.monotonic() - t < 5


@pytest.mark.asyncio
async def test_a_trace_json_bomb_paints_and_quits(base, tmp_path):
    app = open_app(json_bomb(base, tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        t = time.monotonic()
        await settle(app, pilot, timeout=30)
        assert time.monotonic() - t < 30
        await _quits_fast(app, pilot)


@pytest.mark.asyncio
async def test_the_source_screen_of_250_mib_of_newlines_loads(base, tmp_path):
    from thundervis.tui.source_screen import SourceScreen
    app = open_app(source_newlines(base, tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("S")
        for _ in range(500):
            await pilot.pause(0.02)
            screen = app.screen
            if isinstance(screen, SourceScreen) and screen.view is not None:
                break
        else:
            raise AssertionError("the Source screen did not load")
        assert not screen.view.recorded and screen.view.lines
        await pilot.pause(0.1)
        from textual.widgets import Static
        detail = str(screen.query_one("#sdetail", Static).render())
        assert "too large to show" in detail  # the view's note (present's sentence), above the line's detail
        await _quits_fast(app, pilot)
