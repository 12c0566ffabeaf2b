"""The TUI's pass diff folds what the pass did to a run of equal layers as ``thundervis diff``
does (thundervis.diff.layer_folds, worded by thundervis.diff.render): enter or a click on the fold
row opens it and closes it again, unified and side by side; ``f`` (show all) shows every layer."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
from fold_fixtures import write_layer_diff_recording
from tui_helpers import open_app, settle

from thundervis.diff.layer_folds import diff_folds
from thundervis.diff.render import unified_plain
from thundervis.tui.data import open_data

CLOSED = "▸ model.layers.1–5 × 5 more: the same changes as model.layers.0 above"
OPEN = "▾ model.layers.1–5 × 5 more: the same changes as model.layers.0 above"


@pytest.fixture(scope="module")
def layer_diff_rec(tmp_path_factory) -> str:
    return write_layer_diff_recording(str(tmp_path_factory.mktemp("tui_diff_folds") / "layers.tvrec"), 6)


def _fold_rows(view) -> list:
    return [i for i, t in enumerate(view.texts) if re.search(r"^[@ |]*[▸▾] ", t)]


async def _diff_on(app, pilot, side: bool = False):
    await settle(app, pilot)
    await pilot.press("s" if side else "d")
    await settle(app, pilot)
    return app.query_one("LinesView")


def test_the_rows_are_the_diff_commands(layer_diff_rec):
    """The TUI's rows and ``thundervis diff``'s lines come from the same folds and wording."""
    data = open_data(layer_diff_rec)
    d, folds = data.folded_diff(0, "forward", 0, 1)
    assert folds == diff_folds(d) and [f.key for f in folds] == ["model.layers.1–5"]
    rows, _ = data.diff_rows(0, "forward", 0, 1, False, 3)
    cli = unified_plain(d, 3, folds=folds).splitlines()[2:]
    assert [f"{r.marker} {'  ' * r.depth}{r.text}".rstrip() for r in rows] == cli
    opened, _ = data.diff_rows(0, "forward", 0, 1, False, 3, frozenset({"model.layers.1–5"}))
    assert [r.text for r in opened if r.fold] == [OPEN] and len(opened) > len(rows)
    everything, _ = data.diff_rows(0, "forward", 0, 1, False, None, frozenset())
    assert not any(r.fold for r in everything)  # f: show all, as --full


@pytest.mark.parametrize("side", [False, True])
async def test_enter_opens_and_closes_a_diff_layer_fold(layer_diff_rec, side):
    app = open_app(layer_diff_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        view = await _diff_on(app, pilot, side)
        assert view.mode == ("side" if side else "unified")
        (row,) = _fold_rows(view)
        assert CLOSED in view.texts[row]
        assert not any("t18 =" in t for t in view.texts)  # layer 5's tanh is behind the fold
        closed = view.line_count()
        view.move_cursor(row)
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.state.opened_diff_folds == frozenset({"model.layers.1–5"})
        assert view.cursor == row and OPEN in view.texts[row] and view.line_count() > closed
        assert any("t18 =" in t and "[triton]" in t for t in view.texts)
        assert not app.state.opened_folds  # the trace's folds are another matter
        await pilot.press("enter")
        await settle(app, pilot)
        assert view.line_count() == closed and not app.state.opened_diff_folds
        assert CLOSED in view.texts[row]


async def test_a_click_on_the_fold_row_opens_it(layer_diff_rec):
    app = open_app(layer_diff_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        view = await _diff_on(app, pilot)
        (row,) = _fold_rows(view)
        await pilot.click("#lines", offset=(4, row - view.scroll_offset.y))
        await settle(app, pilot)
        assert OPEN in view.texts[row]
        await pilot.click("#lines", offset=(4, 0))  # another line: nothing to open
        await settle(app, pilot)
        assert app.state.opened_diff_folds == frozenset({"model.layers.1–5"})


async def test_show_all_shows_every_layer_and_opened_stays_across_steps(layer_diff_rec):
    app = open_app(layer_diff_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        view = await _diff_on(app, pilot)
        await pilot.press("f")
        await settle(app, pilot)
        assert not _fold_rows(view) and any("t18 =" in t for t in view.texts)
        await pilot.press("f")
        await settle(app, pilot)
        assert len(_fold_rows(view)) == 1
        # the opened set is state: a state with it set shows the fold open at once
        app.state = replace(app.state, opened_diff_folds=frozenset({"model.layers.1–5"}))
        await settle(app, pilot)
        assert any(OPEN in t for t in view.texts)


def _to_fold(open_it: bool):
    async def run_before(pilot):
        app = pilot.app
        view = await _diff_on(app, pilot)
        (row,) = _fold_rows(view)
        view.move_cursor(row)
        if open_it:
            await pilot.press("enter")
            await settle(app, pilot)
        await pilot.pause(0.1)
    return run_before


def test_snapshot_80x24_a_closed_diff_layer_fold(snap_compare, layer_diff_rec):
    """Layer 0's change and one row for layers 1-5, then the head: the whole diff on one screen."""
    assert snap_compare(open_app(layer_diff_rec), terminal_size=(80, 24), run_before=_to_fold(False))


def test_snapshot_160x48_an_opened_diff_layer_fold(snap_compare, layer_diff_rec):
    assert snap_compare(open_app(layer_diff_rec), terminal_size=(160, 48), run_before=_to_fold(True))


async def test_a_search_from_the_diff_lands_in_the_trace_and_opens_its_fold(layer_diff_rec):
    """A search hit is a line of the pass's trace (present.default_view.search_target: never the
    diff): from the diff it shows the trace, with the layer fold that hid the line opened."""
    from thundervis.tui.data import SearchHit
    app = open_app(layer_diff_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        view = await _diff_on(app, pilot)
        lines = app.data.trace_lines(app.state.graph, app.state.chain, app.state.index)
        (fold,) = app.data.layer_folds(app.state.graph, app.state.chain, app.state.index)
        inside = next(i for i in range(fold.start, fold.end) if lines[i].kind == "stmt")
        app._search_hit(SearchHit("symbol", lines[inside].text, lines[inside].uid, line=inside))
        await settle(app, pilot)
        await pilot.pause()
        assert app.state.diff_from is None and view.mode == "trace"
        assert fold.key in app.state.opened_folds and view.texts[view.cursor] == lines[inside].text
