"""The TUI's kernel table shows a repeated layer's kernels as one folded row, and Enter on it opens
the first instance's code."""
from __future__ import annotations

import pytest
from fold_fixtures import record_layers
from tui_helpers import open_app, settle, wait_for

from thundervis.present.kernel_folds import kernel_folds
from thundervis.recording import open_recording


@pytest.fixture(scope="module")
def six_layers(tmp_path_factory) -> str:
    return record_layers(tmp_path_factory.mktemp("tui_folds"), 6)


def _shown(static):
    """Return what a Static shows (its renderable)."""
    return getattr(static, "renderable", None) or getattr(static, "content", None)


async def test_a_folded_row_opens_its_first_instance(six_layers):
    with open_recording(six_layers) as rec:
        fold = next(f for f in kernel_folds(rec) if f.folded)
        first_code = rec.kernel_source(fold.opens).code
    app = open_app(six_layers)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await pilot.pause()
        screen = app.screen
        assert type(screen).__name__ == "KernelsScreen"
        names = [k.name for k in screen.kernels]
        assert not set(fold.names[1:]) & set(names)  # the later instances are in the folded row
        row = next(i for i, k in enumerate(screen.kernels) if k.fold is not None)
        table = screen.query_one("DataTable")
        assert str(table.get_row_at(row)[0]).startswith(fold.label)
        table.move_cursor(row=row)
        await pilot.press("enter")
        static = screen.query_one("#kcode")
        await wait_for(pilot, lambda: hasattr(_shown(static), "code"))
        info = str(screen.query_one("#kinfo").render())
        assert fold.label in info and fold.summary[:40] in info
        assert screen.selected().id == fold.opens
        assert _shown(static).code == first_code  # the first instance's code (rich.syntax.Syntax)
