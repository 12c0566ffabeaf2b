"""The trace pane folds a pass's repeated layers (present.trace_folds) behind one line: enter on
it opens and closes it, and a search hit, a symbol picked elsewhere or a source line's jump that
lands inside a closed fold opens it and puts the cursor on the symbol."""
from __future__ import annotations

from dataclasses import replace

import pytest
from fold_fixtures import record_layers
from tui_helpers import open_app, settle

from thundervis.tui.source_screen import SourceJump


@pytest.fixture(scope="module")
def six_layers(tmp_path_factory) -> str:
    return record_layers(tmp_path_factory.mktemp("tui_trace_folds"), 6)


def _fold_rows(view) -> list:
    return [i for i, t in enumerate(view.texts) if t.lstrip().startswith(("▸", "▾"))]


async def test_enter_opens_and_closes_a_layer_fold(six_layers):
    app = open_app(six_layers)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        pane, view = app.trace, app.query_one("LinesView")
        (fold,) = pane.folds  # the fused forward: layers 2-4 behind layer 1
        hidden = fold.end - fold.start
        closed = view.line_count()
        (row,) = _fold_rows(view)
        assert view.texts[row].strip() == f"▸ {fold.label}"
        assert view.texts[row - 1] == pane.printed_lines[fold.start - 1].text  # layer 1's last line above
        view.move_cursor(row)
        await pilot.press("enter")
        await pilot.pause()
        assert view.line_count() == closed + hidden
        assert view.texts[row].strip().startswith("▾") and view.cursor == row
        assert view.texts[row + 1:row + 1 + hidden] == [ln.text for ln in pane.printed_lines[fold.start:fold.end]]
        await pilot.press("enter")
        await pilot.pause()
        assert view.line_count() == closed and fold.key not in app.state.opened_folds


async def test_jumps_into_a_closed_fold_open_it(six_layers):
    app = open_app(six_layers)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        pane, view = app.trace, app.query_one("LinesView")
        (fold,) = pane.folds
        inside = next(i for i in range(fold.start, fold.end) if pane.printed_lines[i].kind == "stmt")
        uid = pane.printed_lines[inside].uid
        # a search hit: a printed line number
        app.select_printed_line(inside)
        await pilot.pause()
        assert fold.key in app.state.opened_folds and view.texts[view.cursor] == pane.printed_lines[inside].text
        # a symbol picked elsewhere (the kernels table, the details' lineage): its uid
        app.state = replace(app.state, opened_folds=frozenset())
        await pilot.pause()
        assert not any(view.uid_at(i) == uid for i in range(view.line_count()))
        app.select_uid(uid)
        await pilot.pause()
        assert view.uid_at(view.cursor) == uid and fold.key in app.state.opened_folds
        # a source line's jump (the Source screen's enter) to the ops of a hidden layer
        app.state = replace(app.state, opened_folds=frozenset())
        await pilot.pause()
        st = app.state
        app.show_ops(SourceJump(st.graph, st.chain, (uid,), None, "layers6.py", 13))
        await settle(app, pilot)
        await pilot.pause()
        assert view.uid_at(view.cursor) == uid and fold.key in app.state.opened_folds


@pytest.fixture(scope="module")
def layer_trace_rec(tmp_path_factory) -> str:
    from fold_fixtures import write_layer_trace_recording
    return write_layer_trace_recording(str(tmp_path_factory.mktemp("tui_fold_snap") / "layers.tvrec"), 6)


def _to_fold(open_it: bool):
    async def run_before(pilot):
        app = pilot.app
        await settle(app, pilot)
        view = app.query_one("LinesView")
        (row,) = _fold_rows(view)
        view.move_cursor(row)
        if open_it:
            await pilot.press("enter")
        await pilot.pause(0.1)
    return run_before


def test_snapshot_80x24_a_closed_layer_fold(snap_compare, layer_trace_rec):
    """Layer 0 and one line for layers 1-5, then the head: the whole pass on one 80x24 screen."""
    assert snap_compare(open_app(layer_trace_rec), terminal_size=(80, 24), run_before=_to_fold(False))


def test_snapshot_160x48_an_opened_layer_fold(snap_compare, layer_trace_rec):
    assert snap_compare(open_app(layer_trace_rec), terminal_size=(160, 48), run_before=_to_fold(True))
