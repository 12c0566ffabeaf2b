"""Text from a recording made safe to show on a terminal.

Recordings are files people send each other, so any string read from one (a symbol name, a source
line, a traceback, a kernel name) may hold escape sequences that retitle a terminal, clear the
screen or hide text. This module is the one output boundary: every view that prints such a string
passes it through :func:`visible` (or :func:`visible_line` for one-line fields, :func:`html_text`
for HTML), every JSON output through :func:`json_text`: control characters, C1 controls (8-bit
CSI/OSC), Unicode bidi/format controls and lone surrogates become visible escapes, so what the
user sees is what the file holds and nothing fails to encode. The widget's JS ``visible()``
(notebook_ext/static/common.js) matches the same set.
"""
from __future__ import annotations

import re

# C0 controls except newline and tab, DEL, C1 controls (8-bit CSI U+009B and OSC U+009D among
# them), the Unicode format characters that reorder or hide text (bidi marks, embeddings, overrides
# and isolates, zero-width joiners, BOM, ...), and surrogates: a recorded string can hold a lone
# one (JSON's "\ud800"), which no UTF-8 stream can encode, so printing it raw raises.
_FORMAT = "\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f{_FORMAT}]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f{_FORMAT}]")
# In JSON text the C0 controls are already escaped by json itself; the rest only by ensure_ascii,
# which would also escape every accented letter of a user's source line.
_UNSAFE_JSON = re.compile(f"[{_FORMAT}]")


def _escape(match: re.Match) -> str:
    ch = match.group(0)
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """Return ``str(text)`` with every control character except newline and tab made visible
    (``\\x1b``, ``\\u202e``, ...); safe to print on a terminal as several lines."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s)


# A recorded field shown on its own (a name, a file, an error, a traceback) is cut after this many
# characters: a 300 MB error string must not be printed whole (or hang a viewer).
MAX_SHOWN_CHARS = 10_000


def capped(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """Return ``str(text)`` cut to ``limit`` characters, ending ``…(N more)`` when it was longer."""
    s = text if isinstance(text, str) else str(text)
    return s if len(s) <= limit else f"{s[:limit]}…({len(s) - limit} more)"


def visible_line(text: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """Return ``str(text)`` as one terminal-safe line: newlines and tabs are escaped too, and at
    most ``limit`` characters of it are kept (``…(N more)``)."""
    return _UNSAFE_LINE.sub(_escape, capped(text, limit))


def html_text(text: object) -> str:
    """Return ``str(text)`` for HTML: control and bidi characters made visible (as on a terminal:
    a browser would otherwise reorder the text after U+202E), then ``&<>"'`` escaped. ``None``
    gives an empty string. Every HTML output of recorded strings goes through it."""
    import html
    return html.escape(visible("" if text is None else text))


def json_text(value: object, **kwargs) -> str:
    """Return ``json.dumps(value, **kwargs)`` safe to write to a terminal, a pipe or a file: the
    JSON escapes ``\\uXXXX`` stand for every control, C1, bidi/format character and lone surrogate
    (parsing it gives the recorded strings back unchanged), other non-ASCII text stays readable.
    Every JSON output of the CLI goes through it."""
    import json
    kwargs["ensure_ascii"] = False
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(value, **kwargs))


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value):
    """Return ``value`` (JSON-able: dicts, lists, strings, numbers) with every lone surrogate in its
    strings and keys made a visible ``\\udXXX``, so a transport that encodes it as UTF-8 (a widget's
    comm) cannot fail on one; everything else is left as it is (the front end makes it visible).
    The value itself is returned when it holds none (the usual case: one C-speed check)."""
    import json
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except (UnicodeEncodeError, TypeError, ValueError):
        pass

    def walk(v):
        if isinstance(v, str):
            return _SURROGATE.sub(_escape, v)
        if isinstance(v, dict):
            return {walk(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v
    return walk(value)


def plain_console(**kwargs):
    """Return a ``rich.console.Console`` that never reads recorded strings as markup or emoji codes
    (``markup=False, emoji=False, highlight=False``); ``kwargs`` go to the Console. Every Rich
    output of the CLI goes through it, so a pass name ``claim[/]`` or ``[link=...]`` prints as it
    is instead of raising or emitting hyperlinks."""
    from rich.console import Console
    return Console(markup=False, emoji=False, highlight=False, **kwargs)
