"""The TUI at 80x24 (issue 40): a jump shows the symbol's own line, the details pane never takes the
trace below 8 rows, and the chain and pass shown carry a marker that is not colour alone.
tui/layout.py's pure functions, then the app driven at 80x24."""
from __future__ import annotations

import pytest
from tui_helpers import open_app, settle, wait_for

from thundervis.tui.layout import (LEAST_PLOT_ROWS, MEMORY_PLOT_ROWS, MIN_MEMORY_TABLE_ROWS, MIN_TRACE_ROWS,
                                   NOTE_LEAD, jump_top, kept_top, memory_rows, narrow_rows, note_column)


@pytest.mark.parametrize("height", range(16, 60))
@pytest.mark.parametrize("banner", [0, 3])
@pytest.mark.parametrize("passes", [4, 9, 12, 30])
def test_the_details_never_take_the_trace_below_8_rows(height, banner, passes):
    short = height < 34
    band, details = narrow_rows(height, passes, short=short, details=True, banner=banner)
    trace = height - 3 - banner - band - details
    closed_band, _ = narrow_rows(height, passes, short=short, details=False, banner=banner)
    # never fewer than 8 rows, unless the terminal had fewer to give with the details closed
    assert trace >= min(MIN_TRACE_ROWS, height - 3 - banner - closed_band)
    assert details == 0 or 3 <= details <= 10
    assert band >= 4


def test_at_80x24_the_band_gives_way_to_the_details():
    assert narrow_rows(24, 12, short=True, details=False) == (9, 0)
    band, details = narrow_rows(24, 12, short=True, details=True)
    assert (band, details) == (4, 9) and 24 - 3 - band - details == 8


def test_a_jump_shows_the_line_and_the_one_above_it():
    assert jump_top(46, 0, 12, 62) == 42  # below the screen: a third of the way down
    assert jump_top(46, 35, 12, 62) == 35  # on screen with its comment line: stays
    assert jump_top(35, 35, 12, 62) == 31  # at the top edge: its comment line was hidden
    assert jump_top(61, 0, 12, 62) == 50  # near the end: no scrolling past it
    assert jump_top(0, 0, 12, 62) == 0 and jump_top(5, 9, 2, 62) == 4
    assert kept_top(46, 35, 8) == 39 and kept_top(40, 35, 8) == 35 and kept_top(3, 5, 8) == 3


async def _jump(app, pilot, query: str) -> None:
    await settle(app, pilot)
    await pilot.press("slash")
    await wait_for(pilot, lambda: type(app.screen).__name__ == "SearchScreen")
    for ch in query:
        await pilot.press(ch)
    await pilot.pause(0.5)
    await pilot.press("enter")
    await wait_for(pilot, lambda: len(app.screen_stack) == 1)
    await settle(app, pilot)


def _on_screen(view, index: int) -> bool:
    top = view.scroll_offset.y
    return top <= index < top + view.scrollable_content_region.height


@pytest.mark.asyncio
async def test_a_search_jump_then_the_details_at_80x24(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await _jump(app, pilot, "fw_fusion_4")
        view = app.query_one("LinesView")
        cursor = view.cursor
        assert "fw_fusion_4(" in view.texts[cursor]
        assert _on_screen(view, cursor) and _on_screen(view, cursor - 1)  # the line and what is above it
        assert view.scrollable_content_region.height >= 8
        await pilot.press("i")
        await pilot.pause(0.3)
        details = app.query_one("#details")
        assert details.display and details.size.height >= 3
        assert view.scrollable_content_region.height >= MIN_TRACE_ROWS
        assert view.cursor == cursor and _on_screen(view, cursor)
        # the chain and the pass shown are marked by a sign, not colour alone
        chains, passes = app.query_one("#chains"), app.query_one("#passes")
        marked = [i for i in range(chains.option_count) if str(chains.get_option_at_index(i).prompt).startswith("▶")]
        assert marked == [chains.highlighted]
        marked = [i for i in range(passes.option_count) if str(passes.get_option_at_index(i).prompt).startswith("▶")]
        assert marked == [passes.highlighted] and _on_screen(passes, passes.highlighted)
        await pilot.press("p")  # the previous pass: the marker moves with it
        await settle(app, pilot)
        marked = [i for i in range(passes.option_count) if str(passes.get_option_at_index(i).prompt).startswith("▶")]
        assert marked == [passes.highlighted]
        await pilot.press("i")  # closed again: the band has its rows back
        await pilot.pause(0.3)
        assert view.scrollable_content_region.height >= 12


# the memory screen's summary at 80 columns: totals (wraps to 2 rows), the peak, the what-if line
SUMMARY = [96, 66, 40]


@pytest.mark.parametrize("height", range(8, 60))
@pytest.mark.parametrize("width", [60, 80, 160])
def test_the_memory_table_keeps_its_rows_and_the_totals_and_peak_stay(height, width):
    text, plot, table = memory_rows(height, width, SUMMARY)
    kept = memory_rows(100, width, SUMMARY[:2])[0]  # the totals and the peak, wrapped at this width
    assert text + plot + table == height - 2  # the title line and the footer
    assert text >= min(kept, height - 2)  # never cut
    assert plot == 0 or LEAST_PLOT_ROWS <= plot <= MEMORY_PLOT_ROWS
    if height - 2 >= kept + MIN_MEMORY_TABLE_ROWS:
        assert table >= MIN_MEMORY_TABLE_ROWS


def test_memory_rows_at_80x24_and_when_tall():
    assert memory_rows(24, 80, SUMMARY) == (4, 6, 12)  # everything, the table scrolls in 12 rows
    assert memory_rows(14, 80, SUMMARY) == (4, 3, 5)  # the plot gives up rows first
    assert memory_rows(12, 80, SUMMARY) == (3, 2, 5)  # then the what-if line
    assert memory_rows(10, 80, SUMMARY) == (3, 0, 5)  # then the plot
    assert memory_rows(48, 160, SUMMARY) == (3, 6, 37)


# a fusion's line: 250 characters, its note "ran on cpu via torch" the last 20, after "# "
LINE, NOTE = 250, (230, 250)


def test_a_note_past_the_right_edge_is_pinned_to_it():
    col = note_column(LINE, NOTE, 78, 0)
    assert col == 78 - len(NOTE_LEAD) - 20  # the lead and the whole note end at the edge
    assert note_column(LINE, NOTE, 78, 100) == col  # scrolled, but not yet to the note


@pytest.mark.parametrize("width,scroll_x", [(260, 0), (78, 228 - 40), (78, 172)])
def test_a_note_on_screen_is_left_where_it_is(width, scroll_x):
    assert note_column(LINE, NOTE, width, scroll_x) is None


def test_a_view_too_narrow_for_the_note_and_half_the_code_draws_the_line_as_is():
    assert note_column(LINE, NOTE, 40, 0) is None  # 24 of 40 columns would be the note
    assert note_column(LINE, (0, 0), 78, 0) is None and note_column(10, NOTE, 78, 0) is None
