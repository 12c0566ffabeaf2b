"""The user's source files a recording holds (``sources``), read line by line under a budget.

A recorded source is at most :data:`~.writer_rows.MAX_SOURCE_BYTES` (2 MiB) when this version
writes it, but a file someone sends may hold 250 MiB of newlines in 250 KB of zlib: splitting that
builds 262 million strings. So a source is streamed (never expanded whole) and its lines are
counted while streaming against a limit sized from what the views need (the highest line a symbol
points at) within an absolute ceiling; over it the text is :class:`~.budgets.TooLarge` and views
fall back to the code lines the symbols carry.
"""
from __future__ import annotations

from typing import Optional

from .budgets import MiB, TooLarge, count_expanded, expanded_lines
from .model import SourceSnippet

# Lines of one source a view builds rows for, and the expanded size of its text.
MIN_SOURCE_LINES = 50_000
MAX_SOURCE_LINES = 500_000
MAX_SOURCE_SIZE = 8 * MiB


def source_files(store) -> list[str]:
    """Return the user source files whose text the recording on ``store`` holds."""
    if not store.has_table("sources"):
        return []
    return [r[0] for r in store.rows("SELECT file FROM sources ORDER BY file") if isinstance(r[0], str)]


def _stored(store, file: str):
    if not store.has_table("sources"):
        return None
    rows = store.rows("SELECT text FROM sources WHERE file=?", (file,))
    return rows[0][0] if rows else None


def line_budget(highest_line: int = 0) -> int:
    """Return how many lines of a source a view may build: twice the highest line a symbol points
    at, at least :data:`MIN_SOURCE_LINES`, at most :data:`MAX_SOURCE_LINES`."""
    return min(MAX_SOURCE_LINES, max(MIN_SOURCE_LINES, 2 * max(0, highest_line)))


def source_text(store, file: str, limit: int = MIN_SOURCE_LINES) -> Optional[str]:
    """Return the whole text of recorded source ``file`` (None when not recorded);
    :class:`~.budgets.TooLarge` past ``limit`` lines or :data:`MAX_SOURCE_SIZE` (counted first)."""
    value = _stored(store, file)
    what = f"the recorded source of {file!r}"
    if isinstance(value, bytes) and not store.is_reference(value):
        n, size = count_expanded(value, b"\n", limit, MAX_SOURCE_SIZE)
        if n > limit or size > MAX_SOURCE_SIZE:
            raise TooLarge(store.path, what, size, MAX_SOURCE_SIZE)
    text = store.text(value, what)
    if text is not None and (len(text) > MAX_SOURCE_SIZE or text.count("\n") > limit):
        raise TooLarge(store.path, what, len(text))
    return text


def source_lines(store, file: str, limit: int = MIN_SOURCE_LINES, whole: bool = True) -> Optional[list[str]]:
    """Return the lines of recorded source ``file`` (None when not recorded). With ``whole``, a
    text of more than ``limit`` lines or :data:`MAX_SOURCE_SIZE` bytes raises
    :class:`~.budgets.TooLarge` (counted while streaming, nothing built); without, only its first
    ``limit`` lines are read. Undecodable bytes read as U+FFFD."""
    value = _stored(store, file)
    what = f"the recorded source of {file!r}"
    if value is None:
        return None
    if isinstance(value, bytes) and not store.is_reference(value):
        if whole:
            n, size = count_expanded(value, b"\n", limit, MAX_SOURCE_SIZE)
            if n > limit or size > MAX_SOURCE_SIZE:
                raise TooLarge(store.path, what, size, MAX_SOURCE_SIZE)
        lines = list(expanded_lines(value, limit=limit))
        store.text(value, what) if not lines else None  # an empty or damaged blob: one sentence
        return lines
    text = store.text(value, what)  # plain text (schema 1-2), or a group store's reference
    if text is None:
        return None
    if whole and (len(text) > MAX_SOURCE_SIZE or text.count("\n") > limit):
        raise TooLarge(store.path, what, len(text.encode("utf-8", "surrogatepass")))
    lines = text[:MAX_SOURCE_SIZE].split("\n")[:limit]
    if lines and not lines[-1]:
        lines.pop()
    return [x[:MiB].rstrip("\r") for x in lines]


def source_snippet(store, source, context: int) -> Optional[SourceSnippet]:
    """Return the lines around ``source`` (a SourceInfo: file, line, code) from the recorded file
    text, ``context`` lines either side (streamed: only the lines up to there are read); without
    the file text, the recorded code line."""
    if source is None or not source.line:
        return None
    lines = None
    if 1 <= source.line <= MAX_SOURCE_LINES:
        lines = source_lines(store, source.file, source.line + context, whole=False)
    if lines is not None and 1 <= source.line <= len(lines):
        first = max(1, source.line - context)
        return SourceSnippet(source.file, source.line, first, tuple(lines[first - 1:source.line + context]), True)
    return SourceSnippet(source.file, source.line, source.line, (source.code or "",), False)
