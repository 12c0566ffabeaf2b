"""The terminal-safe text helper: control characters from a recording never reach a terminal raw."""
from thundervis.safe_text import visible, visible_line


def test_escape_sequences_become_visible():
    evil = "t0 = prims.add\x1b]0;pwned\x07\x1b[2J\x9b31m"
    out = visible(evil)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert out == "t0 = prims.add\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"


def test_newlines_and_tabs_kept_by_visible_escaped_by_visible_line():
    assert visible("a\n\tb\r") == "a\n\tb\\r"
    assert visible_line("a\n\tb") == "a\\n\\tb"


def test_bidi_and_zero_width_controls_are_visible():
    assert visible("x\u202ey\u200bz") == "x\\u202ey\\u200bz"


def test_plain_text_unchanged():
    s = "t2 = triton_fusion_0(t0, b)  # café f32[8, 64] → ok"
    assert visible(s) == s and visible_line(s) == s
