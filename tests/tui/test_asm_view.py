"""The asm view of the kernels screen (``a``): stage tabs, a Triton line highlights its
instructions, an instruction shows its symbol and source line, recorded text stays data."""
from __future__ import annotations

import contextlib

import pytest
from roofline_fixtures import SASS, roofline_recording
from tui_helpers import open_app, settle

pytestmark = pytest.mark.asyncio


async def _kernels(pilot, app):
    await pilot.press("k")
    await pilot.pause()
    return app.screen


async def _asm(pilot, app):
    await _kernels(pilot, app)
    await pilot.press("a")
    for _ in range(100):
        await pilot.pause(0.05)
        if type(app.screen).__name__ == "AsmScreen" and app.screen.listing is not None or \
                getattr(app.screen, "error", None):
            break
    return app.screen


@contextlib.asynccontextmanager
async def _asm_view(tmp_path, size=(140, 36), build=True):
    """Open the TUI on a roofline recording (``build``: with an sm_90 build of its fusion) and its
    first kernel's asm view; yield (app, pilot, the asm screen)."""
    app = open_app(roofline_recording(str(tmp_path / "r.tvrec"), build=build))
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        yield app, pilot, await _asm(pilot, app)


def _styles(text):
    return {str(s.style) for s in text.spans}


async def test_asm_view_links_triton_lines_instructions_and_source(tmp_path):
    async with _asm_view(tmp_path) as (app, pilot, screen):
        assert type(screen).__name__ == "AsmScreen" and screen.error is None
        title = str(screen.query_one("#atitle").render())
        assert "fw_fusion_0 · sm_90 · SASS · 6 lines · 32 regs · 0 spills · no smem · occupancy 100%" in title
        assert [t.id for t in screen.query("Tab")] == ["ttir", "ttgir", "llir", "ptx", "sass"]
        # It opens on the first Triton line that became instructions: line 3, symbol f3.
        assert (screen.triton_line, screen.symbol) == (3, "f3")
        info = str(screen.query_one("#ainfo").render())
        assert "triton line 3: 2 SASS lines" in info and "symbol f3 prims.add" in info and "model.py:7" in info
        hl = [i for i in range(len(SASS)) if any("on #4b3d12" in s for s in _styles(screen._code_line(i, 100)))]
        assert hl == [1, 2]  # the LDG and the FADD
        # Selecting Triton line 4 (the tanh) moves the highlight to its instruction.
        src = screen.query_one("#asrc")
        src.focus()
        await pilot.press("down")
        await pilot.pause()
        assert (screen.triton_line, screen.symbol) == (4, "f4")
        hl = [i for i in range(len(SASS)) if any("on #4b3d12" in s for s in _styles(screen._code_line(i, 100)))]
        assert hl == [3]
        # u steps through the symbols: f3 (line 3) again after f4.
        await pilot.press("u")
        await pilot.pause()
        assert (screen.triton_line, screen.symbol) == (3, "f3")
        await pilot.press("u")
        await pilot.pause()
        assert (screen.triton_line, screen.symbol) == (4, "f4")
        # Selecting an instruction shows its symbol and user source line, and marks its Triton line.
        code = screen.query_one("#acode")
        code.focus()
        await pilot.pause()
        code.move_cursor(2)
        await pilot.pause()
        info = str(screen.query_one("#ainfo").render())
        assert "SASS line 3: symbol f3 prims.add · model.py:7 · triton line 3" in info
        assert screen.triton_line == 3
        code.move_cursor(5)
        await pilot.pause()
        assert "no symbol" in str(screen.query_one("#ainfo").render())
        # Recorded text is data: markup and control characters are shown, not interpreted.
        line = screen._code_line(4, 200)
        assert "[bold red]pwned[/] <script>x()</script>" in line.plain and "\x1b" not in line.plain
        assert not any("bold" in s or "red" in s for s in _styles(line))
        # Stage tabs: the next stage is PTX (recorded), then a stage this build lacks is one sentence.
        await pilot.press("left_square_bracket")
        for _ in range(60):
            await pilot.pause(0.05)
            if screen.stage == "ptx" and screen.listing is not None and screen.listing.stage == "ptx":
                break
        assert screen.listing.stage == "ptx" and "PTX · 2 lines" in str(screen.query_one("#atitle").render())
        await pilot.press("left_square_bracket")
        for _ in range(60):
            await pilot.pause(0.05)
            if screen.error:
                break
        assert screen.stage == "llir" and "has no llir stage recorded" in screen.error
        assert app.is_running
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "KernelsScreen"


async def test_asm_title_drops_the_line_count_then_the_targets_hint_before_the_build_summary(tmp_path):
    """On a narrow screen the title keeps every number of the build summary: the stage's line
    count goes first, then the other targets' hint, then the summary takes its short form, then
    the "asm" prefix goes, then the stage's name (the tabs show it); only then is the line cut.
    It is refitted on resize."""
    async with _asm_view(tmp_path) as (app, pilot, screen):
        title = screen.query_one("#atitle")
        screen.targets = ["sm_90", "sm_80"]  # a second build's hint, as with two --target
        screen._show_title()
        wide = str(title.render())
        assert wide.endswith("SASS · 6 lines · 32 regs · 0 spills · no smem · occupancy 100% · grid 16  (t: sm_80)")
        summary = wide[wide.index("32 regs"):wide.index("  (t:")]
        without = wide[:wide.index(" · 6 lines")] + wide[wide.index(" · 32 regs"):wide.index("  (t:")]
        shorter = without.replace(summary, "32 regs · 0 spills · no smem · occ 100% · grid 16")
        no_prefix = shorter[len("asm · "):]
        no_stage = no_prefix.replace(" · SASS", "")
        gutter = title.styles.gutter.width
        # (width, what the title is then)
        for width, expected in ((len(wide), wide), (len(wide) - 1, without + "  (t: sm_80)"),
                                (len(without) + len("  (t: sm_80)") - 1, without), (len(without) - 1, shorter),
                                (len(shorter) - 1, no_prefix), (len(no_prefix) - 1, no_stage)):
            await pilot.resize_terminal(width + gutter, 36)
            await pilot.pause()
            shown = str(title.render())
            assert shown == expected and len(shown) <= width, (width, shown)
        await pilot.resize_terminal(40 + gutter, 36)  # too narrow for any layout: cut at the end
        await pilot.pause()
        # The narrowest layout, cut where it meets the edge.
        assert str(title.render()) == title.render_line(0).text.strip() == expected[:39] + "…"


async def test_asm_view_of_a_run_without_targets_says_so(tmp_path):
    async with _asm_view(tmp_path, (120, 30), build=False) as (app, pilot, screen):
        assert screen.listing is None and "was not compiled for any GPU target" in screen.error
        assert "--target sm_90" in str(screen.query_one("#ainfo").render())


async def test_kernels_table_and_details_name_the_target(tmp_path):
    """The kernels table and a kernel's details read ``triton sm_90`` like ``ls`` (the one label of
    present.status.kernel_label, through the kernel row)."""
    app = open_app(roofline_recording(str(tmp_path / "r.tvrec"), build=True))
    async with app.run_test(size=(140, 36)) as pilot:
        await settle(app, pilot)
        screen = await _kernels(pilot, app)
        table = screen.query_one("DataTable")
        assert "triton sm_90" in [str(v) for v in table.get_row_at(0)]
        for _ in range(40):
            await pilot.pause(0.05)
            if "[triton sm_90]" in str(screen.query_one("#kinfo").render()):
                break
        assert "fw_fusion_0  [triton sm_90]" in str(screen.query_one("#kinfo").render())
