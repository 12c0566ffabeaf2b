"""The TUI's trace says what ran each kernel where ``thundervis show`` says it: on the fusion's
line, ``ran on cpu via torch`` (present.trace_lines: one set of notes for every view). Driven with
Textual's Pilot on a real run with the default executors (no CUDA: the fast CPU path)."""
from __future__ import annotations

import io
import os
import textwrap
from contextlib import redirect_stdout

import pytest
import torch

from tui_helpers import open_app, settle

SCRIPT = textwrap.dedent("""\
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = torch.tanh(self.fc(x))
            return (h * h).sum()

    torch.manual_seed(0)
    model = torch.compile(M())
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 8))
""")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> str:
    """A recording of a small model run with the default executors; its path."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("notes")
    script = os.path.join(str(folder), "train_notes.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(str(folder), "n.tvrec")))
    assert result.exit_code == 0, result
    return result.path


def _shown(view) -> list[str]:
    """Return the text of the lines the LinesView draws on screen now."""
    return ["".join(seg.text for seg in view.render_line(y)).rstrip() for y in range(view.size.height)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fast CPU path is for machines without CUDA")
async def test_the_trace_shows_ran_on_where_show_does(cpu_run):
    from thundervis.cli import main
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["show", cpu_run, "--plain"]) == 0
    noted = [ln for ln in out.getvalue().splitlines() if "ran on cpu via torch" in ln]
    assert noted, out.getvalue()
    app = open_app(cpu_run)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        for line in noted:  # show's line, word for word, is a line of the TUI's trace, and drawn
            i = list(view.texts).index(line)
            view.move_cursor(i)
            await pilot.pause(0.1)
            drawn = _shown(view)
            assert any(line.strip() in d for d in drawn), (line, drawn)
            assert "fusion" in line and "ran on cpu via torch" in line.split("#", 1)[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fast CPU path is for machines without CUDA")
async def test_at_80_columns_the_note_stays_on_screen(cpu_run):
    """A fusion's line runs past 80 columns: its note is drawn at the right edge (layout.note_column),
    and scrolled to the right the line is its own text again."""
    app = open_app(cpu_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        i = next(i for i, t in enumerate(view.texts) if "ran on cpu via torch" in t)
        assert len(view.texts[i]) > view.size.width
        view.move_cursor(i)
        await pilot.pause(0.1)
        row = next(d for d in _shown(view) if "fw_fusion" in d)
        assert row.endswith("… # ran on cpu via torch") and len(row) <= view.size.width
        view.scroll_to(x=len(view.texts[i]) - view.size.width + 2, animate=False, immediate=True)
        await pilot.pause(0.1)
        assert "…" not in "".join(_shown(view))
