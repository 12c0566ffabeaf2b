"""The TUI's asm screen (``k`` then ``a``) on a build whose ``line_uids``, members' ops and files,
target and plan hold terminal escapes, C1 and bidi controls and a lone surrogate (issue 41): what
the screen would write to the terminal holds none of them raw, only Textual's own styling."""
from __future__ import annotations

import contextlib
import json
import re
import sqlite3

import pytest
from roofline_fixtures import roofline_recording
from tui_helpers import open_app, settle

pytest.importorskip("textual")
pytestmark = pytest.mark.asyncio

PAYLOAD = "\x1b]0;title\x07\x1b]8;;https://evil.example\x07L\x1b]8;;\x07\x1b[2J\x9b31m\x9d0;t\x9c\u202e\u2066\ud800"
# Textual's own output: SGR styles, cursor moves, OSC 8 links it makes itself (none here).
_OWN = re.compile(r"\x1b\[[0-9;:]*[mHK]")
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _planted(path: str) -> str:
    """Plant the payload in the build's uids (consistently: the rows still find their members),
    ops, files, plan and target."""
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        (summary,) = c.execute("SELECT summary FROM kernel_builds").fetchone()
        s = json.loads(summary)
        uid = {u: u + PAYLOAD for u in s["members"]}
        s["line_uids"] = {k: uid[v] for k, v in s["line_uids"].items()}
        s["members"] = {uid[u]: {**m, "sym": m["sym"] + PAYLOAD, "file": m["file"] + PAYLOAD}
                        for u, m in s["members"].items()}
        s["plan"]["grid"] = f"16{PAYLOAD}"
        c.execute("UPDATE kernel_builds SET summary=?", (json.dumps(s),))
    return path


def _terminal_text(app) -> str:
    """What the app would write to a terminal for a full repaint of its screen."""
    update = app.screen._compositor.render_update(full=True)
    return update.render_segments(app.console)


def _assert_clean(app) -> str:
    text = _terminal_text(app)
    rest = _OWN.sub("", text)
    bad = _RAW.search(rest)
    assert bad is None, repr(rest[max(0, bad.start() - 80):bad.end() + 80])
    return rest


async def test_asm_screen_shows_planted_uids_ops_and_files_visibly(tmp_path):
    app = open_app(_planted(roofline_recording(str(tmp_path / "r.tvrec"), build=True)))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await pilot.pause()
        await pilot.press("a")
        for _ in range(100):
            await pilot.pause(0.05)
            if type(app.screen).__name__ == "AsmScreen" and (app.screen.listing is not None or app.screen.error):
                break
        screen = app.screen
        assert type(screen).__name__ == "AsmScreen" and screen.error is None, getattr(screen, "error", None)
        assert screen.symbol and screen.symbol.startswith("f3\\x1b]0;title")  # uids still match
        shown = [_assert_clean(app)]
        src = screen.query_one("#asrc")
        src.focus()
        for key in ("down", "u", "u", "tab", "down", "down", "down"):  # Triton lines, symbols, instructions
            await pilot.press(key)
            await pilot.pause(0.05)
            shown.append(_assert_clean(app))
        text = "\n".join(shown)
        assert "\\x1b]0;title\\x07" in text and "\\u202e" in text and "\\ud800" in text
        assert "prims.add\\x1b]0;title" in text  # the op, made visible, in the info line
