"""The Source screen: the recorded user file line by line with what each line became; enter jumps
to the line's ops. Driven with Pilot on a harness app and on the real app."""
from __future__ import annotations

import pytest
from textual.app import App

from thundervis.present.status import EAGER
from thundervis.present.source_view import LineOp, SourceFile, SourceLine, source_file
from thundervis.recording import open_recording
from thundervis.tui.app import ThundervisApp
from thundervis.tui.source_screen import SourceJump, SourceScreen, line_detail, line_text


class Harness(App):
    """Opens a SourceScreen at start and keeps what it was dismissed with (styled by the app's
    style sheet, which holds the screen's rules)."""

    CSS_PATH = ThundervisApp.CSS_PATH

    def __init__(self, load, files, **kw):
        super().__init__()
        self.screen_args = (load, files, kw)
        self.jumped = []

    def on_mount(self) -> None:
        load, files, kw = self.screen_args
        self.push_screen(SourceScreen(load, files, **kw), self.jumped.append)


async def _loaded(pilot, timeout: float = 20.0):
    for _ in range(int(timeout / 0.05)):
        await pilot.pause(0.05)
        screen = pilot.app.screen
        if isinstance(screen, SourceScreen) and screen.view is not None:
            return screen
    raise AssertionError("the Source screen did not load")


def _hostile_view() -> SourceFile:
    op = LineOp(0, "forward", "f1", "tanh", "triton", "fw_fusion_0", 3, None, 5.0)
    bad = LineOp(0, "backward", "b2", "mm", "torch", None, None, "ran eagerly: [red]boom\x1b[31m", None,
                 kind=EAGER)
    rows = (SourceLine("/x/[b]evil.py", 1, "import torch", (), None, None),
            SourceLine("/x/[b]evil.py", 2, "y = x.tanh()  # [bold red]not markup[/] \x1b[2J \u202e", (op, bad), 5.0, 0.5),
            SourceLine("/x/[b]evil.py", 3, "print(y)", (), None, None))
    return SourceFile("/x/[b]evil.py", True, None, rows, 10.0, ("/x/[b]evil.py",))


def test_recorded_text_is_shown_as_text_never_markup():
    view = _hostile_view()
    row = view.lines[1]
    t = line_text(row, 1)
    assert "[bold red]not markup[/]" in t.plain and "\\x1b[2J" in t.plain and "\x1b" not in t.plain
    assert "\u202e" not in t.plain and " 50.0%" in t.plain
    d = line_detail(row)
    assert "[red]boom" in d.plain and "\x1b" not in d.plain and "fw_fusion_0" in d.plain


@pytest.mark.asyncio
async def test_screen_lists_lines_and_jumps_to_the_ops_of_the_line():
    view = _hostile_view()
    app = Harness(lambda f: view, [view.file])
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _loaded(pilot)
        lines = screen.query_one("#slines")
        assert lines.option_count == 3 and lines.highlighted == 1  # the first line with ops
        detail = str(screen.query_one("#sdetail").render())
        assert "fw_fusion_0" in detail and "ran eagerly" in detail
        await pilot.press("p")  # no line with ops above: stays
        assert lines.highlighted == 1
        await pilot.press("down", "enter")  # a line without ops: a notice, no jump
        await pilot.pause(0.1)
        assert app.jumped == [] and isinstance(app.screen, SourceScreen)
        await pilot.press("up", "enter")
        await pilot.pause(0.1)
    assert app.jumped == [SourceJump(0, "forward", ("f1",), 3, view.file, 2)]


@pytest.mark.asyncio
async def test_screen_on_a_recording(small_rec):
    rec = open_recording(small_rec)
    try:
        files = rec.source_files()
        app = Harness(lambda f: source_file(rec, f), files)
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _loaded(pilot)
            first = screen.selected()
            assert first is not None and first.ops
            await pilot.press("n")
            second = screen.selected()
            assert second.line > first.line and second.ops
            await pilot.press("enter")
            await pilot.pause(0.1)
        (jump,) = app.jumped
        final = rec.graph(jump.graph).chain(jump.chain).passes[-1]
        uids = {s.uid for s in rec.symbols(final.ref)}
        assert set(jump.uids) <= uids and jump.line == second.line
    finally:
        rec.close()


@pytest.mark.asyncio
async def test_S_opens_the_source_and_enter_shows_the_line_ops_in_their_pass(small_rec):
    from tui_helpers import open_app, settle
    app = open_app(small_rec)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        app.go_to_pass(app.current_chain().passes[0].index)  # start away from the final pass
        await settle(app, pilot)
        await pilot.press("S")
        screen = await _loaded(pilot)
        await pilot.press("n")
        row = screen.selected()
        assert row.ops
        await pilot.press("enter")
        await settle(app, pilot)
        first = row.ops[0]
        assert (app.state.graph, app.state.chain) == (first.graph, first.chain)
        assert app.state.index == app.current_chain().passes[-1].index and app.state.diff_from is None
        view = app.query_one("LinesView")
        assert view.uid_at(view.cursor) == first.uid


@pytest.mark.asyncio
async def test_k_opens_the_kernel_of_the_line(small_rec):
    from tui_helpers import open_app, settle
    app = open_app(small_rec)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("S")
        screen = await _loaded(pilot)
        row = screen.selected()
        while not row.kernel_ids:
            await pilot.press("n")
            row = screen.selected()
        await pilot.press("k")
        for _ in range(100):
            await pilot.pause(0.05)
            if type(app.screen).__name__ == "KernelsScreen":
                break
        assert type(app.screen).__name__ == "KernelsScreen"
        assert app.screen.selected().id == row.kernel_ids[0]


@pytest.mark.asyncio
async def test_long_lines_stay_on_one_row_and_no_share_column_when_not_profiled():
    """At 80x24 a long code line ends in an ellipsis on its own row (never wraps under the gutter;
    the detail pane shows it whole); a file that was not profiled shows no share column."""
    long_code = "y = " + " + ".join(f"layer_{i}(x)" for i in range(30))
    op = LineOp(0, "forward", "f1", "add", "triton", "fw_fusion_0", 3, None, None)
    rows = (SourceLine("/x/long.py", 1, "import torch", (), None, None),
            SourceLine("/x/long.py", 2, long_code, (op,), None, None),
            SourceLine("/x/long.py", 3, "print(y)", (), None, None))
    view = SourceFile("/x/long.py", True, None, rows, None, ("/x/long.py",))
    assert line_text(rows[1], 1, profiled=False).plain.startswith("2 ● y = layer_0(x)")
    app = Harness(lambda f: view, [view.file])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _loaded(pilot)
        await pilot.pause(0.1)
        lines = screen.query_one("#slines")
        shown = [lines.render_line(y).text.rstrip() for y in range(lines.size.height)]
        assert shown[:3] == ["1   import torch", shown[1], "3   print(y)"]
        assert shown[1].startswith("2 ● y = layer_0(x) + layer_1(x)") and shown[1].endswith("…")
        assert len(shown[1]) <= lines.size.width
        assert long_code in str(screen.query_one("#sdetail").render())
