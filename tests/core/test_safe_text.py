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


def test_c1_bidi_isolates_marks_and_lone_surrogates_are_visible():
    """Issue 41: 8-bit CSI/OSC, every bidi override, isolate and mark, and a lone surrogate (which no
    UTF-8 terminal can be sent) come out as escapes, on one line or several."""
    evil = "a\x9b31m\x9d0;t\x9c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\ud800\udfffz"
    for f in (visible, visible_line):
        out = f(evil)
        out.encode("utf-8")  # encodable: no surrogate left
        assert out == ("a\\x9b31m\\x9d0;t\\x9c\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069"
                       "\\u200e\\u200f\\u061c\\ud800\\udfffz")
    assert visible("é 😀 →") == "é 😀 →"  # astral characters are not surrogates in a str


def test_json_text_escapes_what_json_leaves_raw_and_round_trips():
    import json
    from thundervis.safe_text import json_text
    value = {"k\u202e": ["\x1b]0;t\x07", "\x7f\x9b\x9d", "\u2066\ud800", "café"], "n": 1}
    text = json_text(value, indent=1, sort_keys=True)
    assert text.isascii() is False and "café" in text  # readable non-ASCII text stays
    assert not any(c in text for c in "\x1b\x07\x7f\x9b\x9d\u202e\u2066\ud800")
    assert "\\u202e" in text and "\\ud800" in text and "\\u007f" in text
    assert json.loads(text) == value


def test_encodable_escapes_only_lone_surrogates_and_keeps_a_clean_value():
    from thundervis.safe_text import encodable
    clean = {"a": ["\x1b[31m", "é 😀"], "n": 1}
    assert encodable(clean) is clean  # nothing to do: the very value, untouched
    value = {"k\ud800": ["x\udfffy", {"z": "\ud83d"}], "n": None, "f": 1.5}
    out = encodable(value)
    assert out == {"k\\ud800": ["x\\udfffy", {"z": "\\ud83d"}], "n": None, "f": 1.5}
    import json
    json.dumps(out, ensure_ascii=False).encode("utf-8")
