"""The trace pane's signature fold: the ``def`` + inputs block shows as one ``N inputs ▸`` line
until enter or a click opens it; search, selection and diffs keep working around it."""
from __future__ import annotations

import pytest
from tui_helpers import open_app, settle

from thundervis.compiler.printer import PrintedLine
from thundervis.tui.folding import FOLD, fold_signature


def _printed():
    return [PrintedLine("# graph 0", "header"),
            PrintedLine("def f(a,", "def", spans=((0, 3, "keyword"),)),
            PrintedLine("      b):", "def"),
            PrintedLine("  # a: cpu f32[2]  b: cpu f32[2]", "meta",
                        spans=((2, 33, "comment"), (7, 15, "type"), (20, 28, "type"))),
            PrintedLine("  # c is not an input", "source", "u1"),
            PrintedLine("  c = add(a, b)", "stmt", "u1"),
            PrintedLine("  return (c,)", "return")]


def test_fold_keeps_header_and_ops_and_maps_line_numbers():
    lines = _printed()
    closed = fold_signature(lines)
    assert [ln.kind for ln in closed.lines] == ["header", FOLD, "source", "stmt", "return"]
    assert closed.lines[1].text.strip() == "2 inputs ▸"
    assert closed.shown_index(0) == 0 and closed.shown_index(2) == 1 and closed.shown_index(5) == 3
    assert closed.hides(3) and not closed.hides(4) and closed.is_fold_line(1)
    opened = fold_signature(lines, folded=False)
    assert opened.lines[1].text.strip() == "2 inputs ▾" and opened.lines[2:] == lines[1:]
    assert opened.shown_index(3) == 4 and not opened.hides(3)


def test_fold_is_by_kind_not_text():
    # a statement that reads like a def is not folded; plain text lines are left alone
    lines = [PrintedLine("def looks_like_a_signature(x):", "text"), PrintedLine("  # a: f32", "text")]
    assert fold_signature(lines).lines == lines and fold_signature(lines).start == -1
    no_meta = [PrintedLine("def f():", "def"), PrintedLine("  return ()", "return")]
    assert fold_signature(no_meta).lines[0].text.strip() == "signature, 1 line ▸"


async def _toggle_and_check(small_rec, toggle):
    app = open_app(small_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        n_block = sum(1 for ln in app.trace.printed_lines if ln.kind in ("def", "meta"))
        assert n_block > 1
        fold = next(i for i in range(view.line_count()) if view.texts[i].strip().endswith("inputs ▸"))
        assert not any(ln.kind == "meta" for ln in app.trace.shown.lines)
        # the first screen shows ops
        height = view.scrollable_content_region.height
        assert any(view.uid_at(i) for i in range(height))
        closed = view.line_count()
        await toggle(pilot, view, fold)
        assert view.line_count() == closed + n_block
        assert view.texts[fold].strip().endswith("inputs ▾") and view.cursor == fold
        await toggle(pilot, view, fold)
        assert view.line_count() == closed and view.texts[fold].strip().endswith("inputs ▸")


@pytest.mark.asyncio
async def test_enter_opens_and_closes_the_signature(small_rec):
    async def enter(pilot, view, fold):
        view.move_cursor(fold)
        await pilot.press("enter")
        await pilot.pause()
    await _toggle_and_check(small_rec, enter)


@pytest.mark.asyncio
async def test_click_opens_and_closes_the_signature(small_rec):
    async def click(pilot, view, fold):
        view.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        await pilot.click("#lines", offset=(3, fold))
        await pilot.pause()
    await _toggle_and_check(small_rec, click)


@pytest.mark.asyncio
async def test_search_for_an_input_opens_the_block_and_selects_it(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        view = app.query_one("LinesView")
        meta = next(n for n, ln in enumerate(app.trace.printed_lines) if ln.kind == "meta")
        app.select_printed_line(meta)
        await pilot.pause()
        assert not app.state.signature_folded
        assert view.texts[view.cursor] == app.trace.printed_lines[meta].text
        # a line after the block maps through the fold, closed or open
        stmt = next(n for n, ln in enumerate(app.trace.printed_lines) if ln.kind == "stmt")
        app.select_printed_line(stmt)
        await pilot.pause()
        assert view.uid_at(view.cursor) == app.trace.printed_lines[stmt].uid
        assert app.trace.lines[view.cursor] == app.trace.printed_lines[stmt]  # app.trace.lines: the lines on screen


@pytest.mark.asyncio
async def test_diff_views_are_not_folded(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        view = app.query_one("LinesView")
        assert view.mode == "unified"
        await pilot.press("enter")  # not a trace: nothing to open, nothing breaks
        await pilot.pause()
        assert view.mode == "unified" and app.state.signature_folded
