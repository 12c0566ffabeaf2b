"""Recorded strings are data in the TUI, never Textual markup (issue 22 F1).

A recording whose every free-text field holds ``[@click=app.quit]``, a bare ``[/]``, a Rich link,
a backslash, ESC, U+202E and HTML is opened with Pilot and walked through every screen: the landing
screen, line details, diff (unified, side by side), the kernels table (kernel name, executor and
sources columns), its detail, the run info, help, jump and search, and the toast the editor key
shows for a file not on this machine. No MarkupError, the app stays up, and the tags show literally.
"""
from __future__ import annotations

import contextlib

import pytest

from hostile_payloads import assert_no_markup_applied, write_hostile_recording
from tui_helpers import open_app, wait_for

pytest.importorskip("textual")


@pytest.fixture(scope="module")
def hostile_rec(tmp_path_factory) -> str:
    return write_hostile_recording(str(tmp_path_factory.mktemp("hostile") / "hostile.tvrec"))


def _screen_text(app) -> str:
    """Everything the current screen shows (every Static, table cell and option), as plain text."""
    parts = []
    for w in app.screen.walk_children():
        try:
            parts.append(str(w.render()))
        except Exception:
            pass
        if type(w).__name__ == "DataTable":
            for r in range(w.row_count):
                parts.extend(_cells(w, r))
    return "\n".join(parts)


def _cells(table, row: int) -> list[str]:
    """The cells of ``row`` as the DataTable shows them (a str cell is read as markup)."""
    from textual.widgets._data_table import default_cell_formatter
    return [str(default_cell_formatter(c)) for c in table.get_row_at(row)]


def _toasts(app) -> list[str]:
    """The text of every toast the app shows, as the Toast widget renders it (markup or not)."""
    from textual.content import Content
    return [str(Content.from_markup(n.message) if n.markup else Content(n.message)) + n.title
            for n in app._notifications]


async def _settle(app, pilot):
    await wait_for(pilot, lambda: app.overview is not None)
    await pilot.pause(0.1)


async def test_every_screen_shows_recorded_markup_as_text(hostile_rec, monkeypatch):
    app = open_app(hostile_rec)
    quits = []
    monkeypatch.setattr(app, "action_quit", lambda: quits.append(1))
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        shown = _screen_text(app)
        assert "[/]" in shown  # the pass name and trace text, literally
        # Line details: walk a few lines of the trace.
        for _ in range(4):
            await pilot.press("down")
            await pilot.pause(0.05)
        await pilot.press("i")
        await pilot.pause(0.05)
        for key in ("d", "s", "s", "d", "p", "n", "t", "escape", "question_mark", "escape"):
            await pilot.press(key)
            await pilot.pause(0.05)
        assert app.is_running
        # The editor key on a file that is not here: the toast quotes the recorded file name.
        monkeypatch.setattr(app, "suspend", contextlib.nullcontext)
        app.query_one("#details").source = ("/nope/[@click=app.screenshot('x.svg','.')]CLICKME[/] x.py", 3)
        await pilot.press("e")
        await pilot.pause(0.1)
        toasts = _toasts(app)
        assert any("[@click=app.screenshot('x.svg','.')]CLICKME[/]" in t for t in toasts), toasts
        # The kernels table: name, executor and sources columns hold the payload.
        await pilot.press("k")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "KernelsScreen"
        table = app.screen.query_one("DataTable")
        cells = _cells(table, 0)
        assert any("[@click=app.quit]Q[/]" in c for c in cells), cells
        assert_no_markup_applied(_screen_text(app))
        await pilot.click("DataTable", offset=(3, 1))
        await pilot.pause(0.1)
        assert quits == [] and app.is_running
        await pilot.press("escape")
        await pilot.pause(0.05)
        # Jump and search pickers list the pass names.
        for keys in (("j",), ("slash", "Q", "enter")):
            await pilot.press(*keys)
            await pilot.pause(0.1)
            await pilot.press("escape")
            await pilot.pause(0.05)
        assert quits == [] and app.is_running


async def test_notify_never_reads_markup(hostile_rec):
    """The class fix: every toast of the app is plain text, whatever a caller passes."""
    app = open_app(hostile_rec)
    async with app.run_test(size=(120, 36)) as pilot:
        await _settle(app, pilot)
        app.notify("[/] kernel [@click=app.quit]x[/]", title="[b]t[/]")
        app.screen.notify("[/]", severity="warning")
        await pilot.pause(0.1)
        toasts = _toasts(app)
        assert any("[@click=app.quit]x[/]" in t for t in toasts), toasts
        assert app.is_running


async def test_a_group_with_hostile_hosts_and_target_shows_them_as_text(hostile_rec, tmp_path, monkeypatch):
    """The group views (top bar, rank picker, rank comparison) quote host names, the launch target
    and the folder name: text, never markup."""
    import os
    import sys
    from hostile_payloads import PAYLOAD
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "notebook"))
    from group_fixtures import make_group
    from tui_helpers import open_group_app
    folder = str(tmp_path / "job[@click=app.quit]Q[b].tvgroup")
    make_group(folder, [hostile_rec, hostile_rec], world=2, hosts={0: PAYLOAD, 1: PAYLOAD},
               target=["train.py", PAYLOAD])
    app = open_group_app(folder)
    quits = []
    monkeypatch.setattr(app, "action_quit", lambda: quits.append(1))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.overview is not None and app.group_info is not None)
        assert "[@click=app.quit]" in str(app.query_one("#topbar").render())
        for keys in (("ctrl+r",), ("escape",), ("equals_sign",), ("enter",), ("escape",), ("escape",)):
            await pilot.press(*keys)
            await pilot.pause(0.2)
            assert app.is_running
        assert quits == []
