"""At 80x24 the pass list has room for every pass of a compiled chain (9), and the trace pane
below it still starts with the trace's ops (the signature folded)."""
from __future__ import annotations

import pytest
from tui_helpers import open_app, settle

pytestmark = pytest.mark.asyncio


async def _shown_passes(app) -> int:
    ol = app.query_one("#passes")
    return min(len(ol.options), ol.scrollable_content_region.height)


async def test_all_nine_passes_fit_at_80x24(nine_pass_rec):
    app = open_app(nine_pass_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert len(app.query_one("#passes").options) == 9
        assert await _shown_passes(app) == 9
        view = app.query_one("LinesView")
        assert view.scrollable_content_region.height >= 8
        assert sum(1 for i in range(view.scrollable_content_region.height) if view.uid_at(i)) >= 5


async def test_pass_band_follows_the_terminal(small_rec):
    app = open_app(small_rec)  # 12 passes: 9 rows at 80x24, all 12 on a taller narrow terminal
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert await _shown_passes(app) == 9
        await pilot.resize_terminal(80, 48)
        await pilot.pause(0.2)
        assert await _shown_passes(app) == 12
        await pilot.resize_terminal(160, 48)  # wide: the passes beside the trace, full height
        await pilot.pause(0.2)
        assert app.query_one("#left").size.height > 30
