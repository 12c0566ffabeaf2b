"""The memory screen (M): totals, the peak and where, the timeline plot (Textual's Sparkline) and
the saved tensors largest first; a recording made before the ledger says so."""
from __future__ import annotations

import shutil
import sqlite3

import pytest
from tui_helpers import open_app, screen_text, settle, wait_for

pytest.importorskip("torch")

SCRIPT = """
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        h = self.a(x)
        return self.b(torch.tanh(h) * h).square().mean()  # LINE_SAVED

m = torch.compile(M())
m(torch.randn(4, 16)).backward()
"""


@pytest.fixture(scope="module")
def memory_rec(tmp_path_factory) -> str:
    """A real training run recorded with the torch executor."""
    from thundervis.cli import main
    folder = tmp_path_factory.mktemp("memory_tui")
    script = folder / "model.py"
    script.write_text(SCRIPT)
    rec = str(folder / "mem.tvrec")
    assert main(["run", "--no-view", "--executors", "torch", "--out", rec, str(script)]) == 0
    return rec


async def test_memory_screen_shows_totals_plot_and_saved_tensors(memory_rec):
    from thundervis.present.memory import memory_report, timeline_points
    from thundervis.recording import open_recording
    report = memory_report(open_recording(memory_rec))
    app = open_app(memory_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("M")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MemoryScreen")
        text = screen_text(app)
        assert "saved for backward" in text and "static peak" in text and "remat auto" in text
        plot = app.screen.query_one("Sparkline")
        assert list(plot.data) == [b for _, b in timeline_points(report)] and max(plot.data) > 0
        table = app.screen.query_one("DataTable")
        assert table.row_count == sum(1 for s in report.saved if s.counted) > 0
        cells = [str(c) for i in range(table.row_count) for c in table.get_row_at(i)]
        assert any(c.startswith("model.py:") for c in cells), cells


async def test_tampered_ledger_is_a_notification_not_a_crash(memory_rec, tmp_path):
    path = str(tmp_path / "bad.tvrec")
    shutil.copy(memory_rec, path)
    with sqlite3.connect(path) as c:
        c.execute("UPDATE memory_saved SET bytes = 'lots'")
    c.close()
    app = open_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("M")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ != "MemoryScreen"
        assert any("corrupted" in str(n.message) for n in app._notifications)


async def test_memory_screen_on_an_older_recording(memory_rec, tmp_path):
    path = str(tmp_path / "old.tvrec")
    shutil.copy(memory_rec, path)
    with sqlite3.connect(path) as c:
        for t in ("memory_graphs", "memory_saved", "memory_decisions", "memory_timeline", "memory_peaks"):
            c.execute(f"DROP TABLE {t}")
    c.close()
    app = open_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("M")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MemoryScreen")
        assert "not recorded in this recording (made by an older version)" in screen_text(app)


async def _open_memory(pilot):
    app = pilot.app
    await settle(app, pilot)
    await pilot.press("M")
    await wait_for(pilot, lambda: type(app.screen).__name__ == "MemoryScreen")
    await pilot.pause(0.1)


async def test_at_80x24_the_totals_and_the_peak_stay_on_screen_and_the_table_scrolls(memory_rec):
    """The table took the screen's height and pushed the totals and the plot off the top (layout.memory_rows)."""
    app = open_app(memory_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_memory(pilot)
        scr = app.screen
        summary, plot, table = (scr.query_one(s) for s in ("#msummary", "#mplot", "#mtable"))
        assert scr.scroll_offset.y == 0 and summary.region.y == 1 and summary.region.height >= 2
        assert "static peak" in str(summary.render()) and plot.region.height > 0
        assert table.region.bottom <= 23 and table.region.height >= 5  # the footer's row is the last
        for i in range(table.row_count):  # moving down the table scrolls it, never the screen
            table.move_cursor(row=i)
        await pilot.pause(0.1)
        assert summary.region.y == 1


def test_snapshot_80x24_memory(snap_compare, memory_rec):
    assert snap_compare(open_app(memory_rec), terminal_size=(80, 24), run_before=_open_memory)
