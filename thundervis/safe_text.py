"""Text from a recording made safe to show on a terminal.

Recordings are files people send each other, so any string read from one (a symbol name, a source
line, a traceback, a kernel name) may hold escape sequences that retitle a terminal, clear the
screen or hide text. Every view that prints such a string passes it through :func:`visible` (or
:func:`visible_line` for one-line fields): control characters, C1 controls and Unicode bidi/format
controls become visible escapes, so what the user sees is what the file holds.
"""
from __future__ import annotations

import re

# C0 controls except newline and tab, DEL, C1 controls, and the Unicode format characters that
# reorder or hide text (bidi embeddings/overrides/isolates, zero-width joiners, BOM, ...).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


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


def plain_console(**kwargs):
    """Return a ``rich.console.Console`` that never reads recorded strings as markup or emoji codes
    (``markup=False, emoji=False, highlight=False``); ``kwargs`` go to the Console. Every Rich
    output of the CLI goes through it, so a pass name ``claim[/]`` or ``[link=...]`` prints as it
    is instead of raising or emitting hyperlinks."""
    from rich.console import Console
    return Console(markup=False, emoji=False, highlight=False, **kwargs)
