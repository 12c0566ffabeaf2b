"""Snapshot tests (pytest-textual-snapshot) at 80x24 and 160x48 on a small fixed recording: every
duration in it is fixed and no path, time or version is on screen, so the SVGs are the same on
every run. Update after an intended change with ``pytest tests/tui --snapshot-update``."""
from __future__ import annotations

from tui_helpers import details_for, open_app, settle


def _before(select_line: bool = False, press=(), pass_name=None):
    async def run_before(pilot):
        app = pilot.app
        await settle(app, pilot)
        if pass_name is not None:
            c = app.current_chain()
            app.go_to_pass(next(p.index for p in c.passes if p.name == pass_name))
            await settle(app, pilot)
        for key in press:
            await pilot.press(key)
            await settle(app, pilot)
        if select_line:
            view = app.query_one("LinesView")
            view.move_cursor(next(i for i in range(view.line_count()) if view.uid_at(i)
                                  and view.texts[i].lstrip("-+ ").startswith("(")))
            await details_for(app, pilot)
        await pilot.pause(0.1)
    return run_before


def test_snapshot_80x24_last_pass(snap_compare, small_rec):
    assert snap_compare(open_app(small_rec), terminal_size=(80, 24), run_before=_before())


def test_snapshot_80x24_nine_passes(snap_compare, nine_pass_rec):
    """Every pass of a compiled chain (9) shows at 80x24, and the trace's first ops below them."""
    assert snap_compare(open_app(nine_pass_rec), terminal_size=(80, 24), run_before=_before())


def test_snapshot_80x24_diff(snap_compare, small_rec):
    assert snap_compare(open_app(small_rec), terminal_size=(80, 24),
                        run_before=_before(press=("d",), pass_name="fuse", select_line=True))


def test_snapshot_160x48_diff_with_details(snap_compare, small_rec):
    assert snap_compare(open_app(small_rec), terminal_size=(160, 48),
                        run_before=_before(press=("d",), pass_name="fuse", select_line=True))


def test_snapshot_160x48_side_by_side(snap_compare, small_rec):
    assert snap_compare(open_app(small_rec), terminal_size=(160, 48),
                        run_before=_before(press=("s",), pass_name="fuse"))


def test_snapshot_160x48_kernels(snap_compare, small_rec):
    async def run_before(pilot):
        await settle(pilot.app, pilot)
        await pilot.press("k")
        await pilot.pause(0.5)
        screen = pilot.app.screen
        for _ in range(100):
            await pilot.pause(0.05)
            if not any(w.is_running for w in pilot.app.workers):
                break
        assert type(screen).__name__ == "KernelsScreen"
    assert snap_compare(open_app(small_rec), terminal_size=(160, 48), run_before=run_before)


def _comparison():
    async def run_before(pilot):
        from tui_helpers import wait_for
        app = pilot.app
        await wait_for(pilot, lambda: app.loaded and app.group_info is not None)
        await pilot.press("equals_sign")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankComparisonScreen" and app.screen.loaded)
        await pilot.pause(0.1)
    return run_before


def test_snapshot_80x24_rank_comparison(snap_compare, variant_group):
    from tui_helpers import open_group_app
    assert snap_compare(open_group_app(variant_group), terminal_size=(80, 24), run_before=_comparison())


def test_snapshot_160x48_rank_comparison(snap_compare, variant_group):
    from tui_helpers import open_group_app
    assert snap_compare(open_group_app(variant_group), terminal_size=(160, 48), run_before=_comparison())


def test_snapshot_100x30_source(snap_compare, small_rec):
    async def run_before(pilot):
        await settle(pilot.app, pilot)
        await pilot.press("S")
        for _ in range(200):
            await pilot.pause(0.05)
            if getattr(pilot.app.screen, "view", None) is not None:
                break
        assert type(pilot.app.screen).__name__ == "SourceScreen"
        await pilot.press("n")
        await pilot.pause(0.1)
    assert snap_compare(open_app(small_rec), terminal_size=(100, 30), run_before=run_before)


def _search_jump(query: str, details: bool = False):
    """Search ``query`` (``/``, type, Enter), then with ``details`` open the details pane (``i``)."""
    async def run_before(pilot):
        from tui_helpers import wait_for
        app = pilot.app
        await settle(app, pilot)
        await pilot.press("slash")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SearchScreen")
        for ch in query:
            await pilot.press(ch)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ThundervisApp" or app.screen is app.screen_stack[0])
        await settle(app, pilot)
        if details:
            await pilot.press("i")
            await pilot.pause(0.3)
        await pilot.pause(0.1)
    return run_before


def test_snapshot_80x24_search_jump(snap_compare, small_rec):
    """A search jump shows the symbol's own line (and its source comment above it), the chain and
    pass shown marked by '▶', not by colour alone."""
    assert snap_compare(open_app(small_rec), terminal_size=(80, 24), run_before=_search_jump("fw_fusion_4"))


def test_snapshot_80x24_search_jump_with_details(snap_compare, small_rec):
    """With the details open under the trace, the trace keeps 8 rows and the selected line."""
    assert snap_compare(open_app(small_rec), terminal_size=(80, 24),
                        run_before=_search_jump("fw_fusion_4", details=True))
