"""Budgets on what is built from a recording, not only on what is read.

Decompression is capped (:data:`~.typed.MAX_DECOMPRESSED`), but a few hundred KB of zlib still
expand into 250 MiB of ``{"a":[]}`` objects, newlines or row ids, and each of those becomes a
Python object. So every decoder counts what it is about to create (objects of a JSON text, lines
of a source, entries of a row list) against a limit sized from the recording's own counts
(symbols, rows, lines) with an absolute ceiling, *before* creating it: counting streams through the
compressed blob and stops at the limit, so a bomb costs a 1 MiB buffer. Over a budget, the part
raises :class:`TooLarge`, a :class:`~.errors.RecordingError` whose sentence says "too large to
show (N MiB)": views show that sentence in the part's place and the rest of the view works.
"""
from __future__ import annotations

import zlib
from typing import Iterator, Optional

from .errors import RecordingError

MiB = 1 << 20
_CHUNK = 1 << 20

# JSON objects and arrays a pass trace may hold per symbol row of the recording (a real trace has
# about 3 per distinct row and 36 per top-level symbol), with a floor for small recordings and a
# ceiling that keeps the parsed trace well under a GiB whatever the counts say.
OBJECTS_PER_SYMBOL = 200
MIN_OBJECTS = 500_000
MAX_OBJECTS = 3_000_000


class TooLarge(RecordingError):
    """A part of a recording too large to build into a view: ``str()`` is one sentence ending in
    "too large to show (N MiB)"; ``size`` is its expanded size in bytes (or what was seen of it),
    ``shown`` the "N MiB" (or "over N MiB") of the sentence."""

    def __init__(self, where: str, what: str, size: int, cap: Optional[int] = None):
        self.size = size
        self.shown = shown = f"over {size_mib(cap)}" if cap is not None and size > cap else size_mib(size)
        super().__init__(f"{where}: {what} is too large to show ({shown}).")


def size_mib(size: int) -> str:
    """Return ``size`` bytes as "N MiB" (one decimal under 10 MiB)."""
    mib = size / MiB
    return f"{mib:.1f} MiB" if mib < 10 else f"{mib:.0f} MiB"


def object_budget(n_symbols: int) -> int:
    """Return how many JSON objects and arrays a pass trace of a recording holding ``n_symbols``
    symbol rows may build."""
    return min(MAX_OBJECTS, max(MIN_OBJECTS, OBJECTS_PER_SYMBOL * max(0, n_symbols)))


def check_json_objects(text: str, budget: int, what: str, where: str) -> None:
    """Raise :class:`TooLarge` when the JSON ``text`` would build more than ``budget`` objects and
    arrays (counted as ``{`` and ``[``, an upper bound, in C before anything is parsed)."""
    n = text.count("{")
    if n <= budget:
        n += text.count("[")
    if n > budget:
        raise TooLarge(where, what, len(text))


def expanded_chunks(data) -> Iterator[bytes]:
    """Yield the zlib-decompressed ``data`` 1 MiB at a time (never more in memory); stops quietly on
    a damaged stream (the full decompression that follows a count reports it in one sentence)."""
    d = zlib.decompressobj()
    rest = bytes(data)
    try:
        while rest or not d.eof:
            out = d.decompress(rest, _CHUNK)
            rest = d.unconsumed_tail
            if out:
                yield out
            elif not rest or d.eof:
                break
    except zlib.error:
        return


def count_expanded(data, needle: bytes, limit: int, cap: int) -> tuple[int, int]:
    """Return (occurrences of the one-byte ``needle``, bytes expanded) in the zlib blob ``data``;
    once the count passes ``limit`` it only measures the size, and it stops once the size passes
    ``cap`` (a 1 MiB buffer either way: a 1 GiB bomb costs ``cap`` of inflating, never memory)."""
    count = size = 0
    for chunk in expanded_chunks(data):
        if count <= limit:
            count += chunk.count(needle)
        size += len(chunk)
        if size > cap:
            break
    return count, size


def expanded_lines(data, encoding: str = "utf-8", limit: Optional[int] = None) -> Iterator[str]:
    """Yield the lines (without their ends) of the zlib blob ``data`` decoded as ``encoding`` with
    replacement, one at a time; a line longer than :data:`MiB` characters is cut there. After
    ``limit`` lines, stop."""
    import codecs
    dec = codecs.getincrementaldecoder(encoding)("replace")
    tail, n = "", 0
    for chunk in expanded_chunks(data):
        text = tail + dec.decode(chunk)
        parts = text.split("\n")
        tail = parts.pop()
        for line in parts:
            yield line[:MiB].rstrip("\r")
            n += 1
            if limit is not None and n >= limit:
                return
        tail = tail[:MiB]
    tail += dec.decode(b"", final=True)
    if tail:
        yield tail[:MiB].rstrip("\r")
