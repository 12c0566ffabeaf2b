"""How trace lines and diff rows look: a small highlighter for the printed trace language (calls,
fusions, proxies, constants, shape comments, source comments) and the diff colours.

Everything returns ``rich.text.Text``; every recorded string goes through
:func:`thundervis.safe_text.visible_line` first, and is appended as plain text (never markup).
"""
from __future__ import annotations

import re
from typing import Optional

from rich.style import Style
from rich.text import Text

from thundervis.present.collectives import is_communication
from thundervis.present.line_kinds import CALL, CODE, COMMENT, EXECUTOR, FILE, KEYWORD, MODULE, NOTE, TYPE, UID
from thundervis.safe_text import visible_line

FG = "#abb2bf"
DIM = "#5c6370"
S_KEYWORD = Style(color="#c678dd", bold=True)
S_PRIM = Style(color="#61afef")
S_ATEN = Style(color="#e5c07b")
S_FUSION = Style(color="#ff79c6", bold=True)
S_NUMBER = Style(color="#d19a66")
S_STRING = Style(color="#98c379")
S_COMMENT = Style(color=DIM)
S_SHAPE = Style(color="#56b6c2", dim=True)
S_FILE = Style(color="#56b6c2")
S_CODE = Style(color="#98c379", italic=True)
S_MODULE = Style(color="#7f848e")
S_HEADER = Style(color="#e5c07b", bold=True)
S_EXECUTOR = Style(color="#7f848e", italic=True)
# Communication ops (collectives and their waits, traced into a graph): a colour of their own, a
# tinted row and a marker in the indentation, so the places a graph talks to other ranks stand out.
COMM = "#ef8f5a"
S_COMM = Style(color=COMM, bold=True)
S_COMM_ROW = Style(bgcolor="#35261d")
COMM_MARK = "⇄"

_TOKEN = re.compile(
    r"(?P<str>'[^']*'|\"[^\"]*\")"
    r"|(?P<call>\b[A-Za-z_][\w.]*(?=\())"
    r"|(?P<kw>\b(?:def|return|del|None|True|False)\b)"
    r"|(?P<num>(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?\b)")
_SHAPE = re.compile(r"\b(?:cpu|cuda(?::\d+)?|meta|mps)\s+\w+\[[^\]]*\]")
_FUSION = re.compile(r"^\w*fusion_?\d+$")


def _call_style(name: str) -> Style:
    if name.startswith("prims."):
        return S_PRIM
    if is_communication(name):
        return S_COMM
    if _FUSION.match(name):
        return S_FUSION
    return S_ATEN


def _code(text: Text, start: int, end: int) -> None:
    """Style the code between ``start`` and ``end`` of ``text`` (calls, keywords, constants)."""
    plain = text.plain
    for m in _TOKEN.finditer(plain, start, end):
        kind = m.lastgroup
        if kind == "call":
            text.stylize(_call_style(m.group()), m.start(), m.end())
        elif kind == "kw":
            text.stylize(S_KEYWORD, m.start(), m.end())
        elif kind == "num":
            text.stylize(S_NUMBER, m.start(), m.end())
        elif kind == "str":
            text.stylize(S_STRING, m.start(), m.end())


def _comment(text: Text, start: int) -> None:
    text.stylize(S_COMMENT, start)
    for m in _SHAPE.finditer(text.plain, start):
        text.stylize(S_SHAPE, m.start(), m.end())


def _split_comment(plain: str, start: int) -> int:
    """Return where the trailing ``  # ...`` comment of a statement starts (len when none)."""
    depth, quote = 0, None
    for i in range(start, len(plain)):
        ch = plain[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "#" and depth == 0:
            return i
    return len(plain)


_SPAN_STYLE = {COMMENT: S_COMMENT, TYPE: S_SHAPE, EXECUTOR: S_EXECUTOR, NOTE: S_COMMENT, UID: S_COMMENT,
               FILE: S_FILE, CODE: S_CODE, MODULE: S_MODULE, KEYWORD: S_KEYWORD}


def trace_line(line) -> Text:
    """Return one printed trace line (a ``compiler.printer.PrintedLine``), highlighted from the
    printer's spans (plain ``text`` lines, or a line whose text had to be made visible, are
    highlighted from their shape)."""
    raw, kind = line.text, line.kind
    shown = visible_line(raw)
    text = Text(shown, style=FG, no_wrap=True, end="")
    if kind == "header":
        text.stylize(S_HEADER)
        return text
    if kind == "text" or shown != raw:
        return _plain_line(text)
    lead = len(shown) - len(shown.lstrip())
    if kind == "del":
        text.stylize(S_COMMENT)
        return text
    code_start, code_end, comm = lead, len(shown), False
    for a, e, k in line.spans:
        if k == COMMENT and e - a > 1 and a >= code_start:
            code_end = min(code_end, a)
    if kind == "sub":
        text.stylize(S_COMMENT, lead, lead + 2)
        text.stylize(S_DIM_ONLY, lead)
        code_start = lead + 2
    if kind in ("stmt", "sub", "def", "return"):
        _code(text, code_start, code_end)
    for a, e, k in line.spans:
        if k == CALL:
            name = shown[a:e]
            comm = comm or is_communication(name)
            text.stylize(_call_style(name), a, e)
        elif k in _SPAN_STYLE and not (kind == "sub" and k == COMMENT and e - a == 1):
            text.stylize(_SPAN_STYLE[k], a, e)
    if comm and lead and kind in ("stmt", "sub"):
        marked = Text(COMM_MARK, style=S_COMM, end="")
        marked.append_text(text[1:])
        marked.stylize(S_COMM_ROW, 0)
        marked.style = S_COMM_ROW  # the row's tint past its text (see LinesView.render_line)
        return marked
    return text


def _plain_line(text: Text) -> Text:
    """Highlight a line known only by its text: a comment, or code with a trailing comment."""
    plain = text.plain
    lead = len(plain) - len(plain.lstrip())
    if plain.lstrip().startswith("#"):
        _comment(text, lead)
        return text
    cut = _split_comment(plain, lead)
    _code(text, lead, cut)
    if cut < len(plain):
        _comment(text, cut)
    return text


def code_text(raw: str) -> Text:
    """Return a diff row's text (a statement without its shape comment), highlighted."""
    line = visible_line(raw)
    text = Text(line, style=FG, no_wrap=True, end="")
    cut = _split_comment(line, 0)
    _code(text, 0, cut)
    if cut < len(line):
        text.stylize(S_EXECUTOR, cut)
    return text


# -------------------------------------------------------------------------------------- diffs

# (row background, marker colour) per diff status; intra-line changes get a stronger background.
DIFF_BG = {
    "unchanged": (None, DIM),
    "changed-": ("#3a1f24", "#e06c75"),
    "changed+": ("#1c3324", "#98c379"),
    "added": ("#1c3324", "#98c379"),
    "removed": ("#3a1f24", "#e06c75"),
    "replaced-by": ("#3a3320", "#e5c07b"),
    "fused-into": ("#33203d", "#ff79c6"),
    "moved": ("#18313a", "#56b6c2"),
    "fold": (None, DIM),
}
HIGHLIGHT = {"-": Style(bgcolor="#7a2e37", bold=True), "+": Style(bgcolor="#2e6b3f", bold=True)}
NOTE_STYLE = {"fused-into": "#ff79c6", "replaced-by": "#e5c07b", "moved": "#56b6c2", "added": "#98c379",
              "removed": "#e06c75"}


# Style objects made once: rich caches style combinations by identity, so a fresh Style per row
# would make every row's rendering miss that cache.
S_DIM_ONLY = Style(dim=True)
S_FOLD = Style(color=DIM, italic=True)
ROW_BG = {k: Style(bgcolor=bg) for k, (bg, _) in DIFF_BG.items() if bg}
MARKER = {k: Style(color=colour, bold=True) for k, (_, colour) in DIFF_BG.items()}
# not NOTE: that name is the span kind imported from present.line_kinds above
S_DIFF_NOTE = {k: Style(color=NOTE_STYLE.get(k, DIM), italic=True) for k in list(DIFF_BG) + ["changed"]}


def _status_key(status: str, marker: str) -> str:
    return f"changed{marker}" if status == "changed" else status


def diff_cell(row, marker: Optional[str] = None, with_marker: bool = True) -> Text:
    """Return one diff row (``thundervis.diff.render.Row``) as highlighted text with its status
    background, intra-line highlights and (unified) its note."""
    marker = marker if marker is not None else row.marker
    key = _status_key(row.status, marker)
    out = Text(no_wrap=True, end="")
    if row.status == "fold":
        out.append(visible_line(row.text), style=S_FOLD)
        return out
    if with_marker:
        out.append(f"{row.marker} ", style=MARKER.get(key, S_FOLD))
    out.append("  " * row.depth)
    body = code_text(row.text)
    offset = len(out.plain)
    out.append_text(body)
    for s, e in row.spans:
        out.stylize(HIGHLIGHT.get(marker, S_DIM_ONLY), offset + s, offset + e)
    if row.status in ("removed", "fused-into") or (row.status == "changed" and marker == "-"):
        out.stylize(S_DIM_ONLY, offset)
    bg = ROW_BG.get(key)
    if bg is not None:
        out.stylize(bg, 0)
        out.style = bg  # the row's fill past its text (see LinesView.render_line)
    return out


def diff_note(note: str, status: str) -> Text:
    """Return a diff row's note (``→ fused into fw_fusion_3`` ...), styled by status."""
    return Text(visible_line(note), style=S_DIFF_NOTE.get(status, S_FOLD), end="")
