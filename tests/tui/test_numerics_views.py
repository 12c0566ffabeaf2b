"""The numerics views of the TUI: the numerics screen (kernels by verdict), enter opening the kernel
and its chain's bisect, the verdict column of the kernels table, the marker on a flagged fusion's
trace line and the palette's entries; recorded strings stay text."""
from __future__ import annotations

import os
import re
import sqlite3

import pytest
from tui_helpers import open_app, screen_text, settle, wait_for

pytestmark = pytest.mark.asyncio

SCRIPT = """\
import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.tanh(self.fc2(self.ln(F.gelu(self.fc1(x)))))


model = torch.compile(M())
for _ in range(2):
    model(torch.randn(8, 16)).square().mean().backward()
"""


@pytest.fixture(scope="module")
def checked_rec(tmp_path_factory) -> str:
    """A real run with --check-numerics and --capture-inputs; one kernel's row is then marked
    flagged (with a name holding markup) so the views have something to show."""
    from thundervis.cli import main
    folder = tmp_path_factory.mktemp("numerics_tui")
    script = folder / "model.py"
    script.write_text(SCRIPT)
    rec = str(folder / "checked.tvrec")
    assert main(["run", "--no-view", "--executors", "triton", "--check-numerics", "--capture-inputs",
                 "--out", rec, str(script)]) == 0
    return rec


def _flag(rec: str, tmp_path) -> tuple[str, str, str]:
    """Copy ``rec`` with its first forward kernel flagged; return (path, kernel name, fusion uid)."""
    import shutil
    path = str(tmp_path / "flagged.tvrec")
    shutil.copy(rec, path)
    with sqlite3.connect(path) as c:
        name, uid = c.execute("SELECT kernel, uid FROM kernel_numerics WHERE chain='forward' ORDER BY kernel").fetchone()
        c.execute("UPDATE kernel_numerics SET verdict='flagged', detail='[b]markup[/b]', max_rel_error=0.5, ratio=1e6"
                  " WHERE kernel=? AND chain='forward'", (name,))
    c.close()
    return path, name, uid


async def test_numerics_screen_lists_kernels_by_verdict_and_opens_the_bisect(checked_rec, tmp_path):
    path, flagged, _ = _flag(checked_rec, tmp_path)
    app = open_app(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("N")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "NumericsScreen")
        screen = app.screen
        assert screen.rows[0].kernel == flagged and screen.rows[0].verdict == "flagged"
        assert {r.verdict for r in screen.rows[1:]} == {"ok"}
        assert "1 flagged" in screen_text(app)
        table = screen.query_one("DataTable")
        first = [str(c) for c in table.get_row_at(0)]
        assert first[0] == "✗ flagged" and first[1] == flagged
        # where it ran (present.status.path_text) and the recorded detail, as text, never markup
        assert first[-2] == "cpu via triton-interpreter" and first[-1] == "[b]markup[/b]"
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "BisectScreen")
        await wait_for(pilot, lambda: "no divergence" in screen_text(app), timeout=120)
        text = screen_text(app)
        assert flagged in text and "[b]markup[/b]" in text  # the recorded detail shown as text
        # every bisected pass, from remat (the passes before it hold the other remat policy's split,
        # and the note says so) to codegen
        assert "codegen" in text and re.search(r"^\s+1 remat\s+max rel", text, re.M)
        assert "note: bisected from pass 1 remat" in text and "pass 1 float32 vs float64" in text


async def test_kernels_table_has_a_verdict_column_and_the_trace_line_a_marker(checked_rec, tmp_path):
    path, flagged, uid = _flag(checked_rec, tmp_path)
    app = open_app(path)
    async with app.run_test(size=(200, 48)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        row = next(i for i, ln in enumerate(app.trace.lines) if ln.uid == uid and ln.kind == "stmt")
        assert view._render(row, 200).plain.startswith("✗")
        others = [i for i, ln in enumerate(app.trace.lines) if ln.kind == "stmt" and ln.uid != uid]
        assert all(not view._render(i, 200).plain.startswith("✗") for i in others)
        await pilot.press("k")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "KernelsScreen")
        table = app.screen.query_one("DataTable")
        # the verdict comes right after the kernel's name, seen without scrolling at any width
        assert [str(c.label) for c in table.columns.values()][:2] == ["kernel", "numerics"]
        cells = {str(table.get_row(k)[0]).split(" ")[0]: str(table.get_row(k)[1]) for k in table.rows}
        assert cells[flagged] == "✗ flagged"
        assert all(v == "✓ ok" for k, v in cells.items() if k != flagged)


async def test_palette_has_numerics_and_bisect(checked_rec):
    from thundervis.tui.palette import palette_entries
    app = open_app(checked_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        titles = [t for t, _, _ in palette_entries(app)]
        assert "Numerics" in titles and "Bisect" in titles
        await pilot.press("B")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "BisectScreen")
        await wait_for(pilot, lambda: "no divergence" in screen_text(app), timeout=120)
        assert "captured inputs" in screen_text(app)
