"""Typed reading at the store's door: every column and JSON value a recording store hands out is
checked here for type, range, depth and size, and anything else is one sentence in a
:class:`~.errors.RecordingError`.

A recording is a file people send each other, so nothing read from it is trusted: a column may hold
a blob where text belongs, text where a number belongs, or a number out of range; a JSON value may
be nested 100,000 deep; a compressed blob may expand a thousandfold. The functions below are the
only place those checks live: :func:`check_rows` (column types and ranges of query results),
:func:`load_json` (JSON with a depth limit and an expected type), :func:`decompress` (zlib with a
cap on the expanded size) and :func:`regular_file` (refuse FIFOs and devices before opening).
"""
from __future__ import annotations

import json
import math
import os
import stat
import zlib
from typing import Any, Iterable, Optional, Sequence

from .errors import RecordingError

# JSON values other than traces (lists of uids, kernel inputs, events, timings, rank files) are
# shallow; traces nest subsymbols (fusions of decompositions) and get a deeper limit.
MAX_JSON_DEPTH = 32
MAX_TRACE_DEPTH = 200
# Whatever is compressed in a store (trace texts, rank files) expands to at most this much.
MAX_DECOMPRESSED = 256 << 20
# Counts a recording states and a reader loops over (world size, ranks) stay below this.
MAX_COUNT = 1 << 20


def _finite(v) -> bool:
    return v.__class__ is int or math.isfinite(v)


def _nat(v) -> bool:
    return v >= 0 and _finite(v)


# code -> (allowed classes, extra test or None, what the message says belongs there)
_KINDS: dict[str, tuple[tuple, Any, str]] = {
    "int": ((int,), None, "an integer"),
    "int?": ((int, type(None)), None, "an integer"),
    "nat": ((int,), lambda v: v >= 0, "a non-negative integer"),
    "nat?": ((int, type(None)), lambda v: v is None or v >= 0, "a non-negative integer"),
    "num": ((int, float), _finite, "a finite number"),
    "num?": ((int, float, type(None)), lambda v: v is None or _finite(v), "a finite number"),
    "pos?": ((int, float, type(None)), lambda v: v is None or _nat(v), "a non-negative number"),
    "pos": ((int, float), _nat, "a non-negative number"),
    "text": ((str,), None, "text"),
    "text?": ((str, type(None)), None, "text"),
    "any": ((int, float, str, type(None)), None, "a plain value"),
}


def describe(value) -> str:
    """Return a few words naming what ``value`` (read from a file) is, for a message."""
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"a blob of {len(value)} bytes"
    if isinstance(value, str):
        shown = value if len(value) <= 20 else value[:20] + "…"
        return f"the text {shown!r}"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}" if len(repr(value)) <= 24 else "a huge number"
    return f"a JSON {type(value).__name__}"


def row_checker(table: str, columns: Sequence[str], kinds: Sequence[str]):
    """Return a function ``check(rows, where)`` that raises :class:`RecordingError` (one sentence
    naming ``where``, the table and the column) unless every value of every row of ``rows`` is of
    its column's kind (codes of :data:`_KINDS`, such as ``"nat"`` or ``"text?"``); it returns the
    rows. Built once per query shape: the check is one class test per value on the fast path."""
    specs = [_KINDS[k] for k in kinds]
    classes = [s[0] for s in specs]
    tests = [(i, s[1]) for i, s in enumerate(specs) if s[1] is not None]

    def fail(row, where):
        for i, (value, spec) in enumerate(zip(row, specs)):
            if value.__class__ not in spec[0] or (spec[1] is not None and not spec[1](value)):
                raise RecordingError(f"{where} is corrupted ({table}.{columns[i]} holds {describe(value)} "
                                     f"where {spec[2]} belongs).")
        raise RecordingError(f"{where} is corrupted ({table} has a row of the wrong width).")

    def check(rows: list, where: str) -> list:
        width = len(classes)
        for row in rows:
            if len(row) != width:
                fail(row, where)
            for value, allowed in zip(row, classes):
                if value.__class__ not in allowed:
                    fail(row, where)
            for i, test in tests:
                if not test(row[i]):
                    fail(row, where)
        return rows
    return check


def check_value(value, kind: str, what: str, where: str):
    """Return ``value`` when it is of ``kind`` (a code of :data:`_KINDS`); otherwise raise
    :class:`RecordingError` naming ``what`` and ``where``."""
    allowed, test, says = _KINDS[kind]
    if value.__class__ not in allowed or (test is not None and not test(value)):
        raise RecordingError(f"{where} is corrupted ({what} is {describe(value)} where {says} belongs).")
    return value


def depth_of(value, limit: int) -> int:
    """Return the nesting depth of a parsed JSON ``value`` (iteratively), stopping at ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d > deepest:
                deepest = d
                if deepest > limit:
                    return deepest
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def load_json(text, what: str, where: str, expect: Optional[type] = None, default=None,
              depth: Optional[int] = MAX_JSON_DEPTH):
    """Parse the stored JSON ``text`` (``what`` in ``where``, for the message) and return it.

    NULL gives ``default``. The text must be a string, parse, be nested at most ``depth`` deep
    (None: the parser's own bound only, for traces the compiler's loader validates) and, with
    ``expect``, be of that type (a JSON ``null`` then gives ``default``). Anything else raises
    :class:`RecordingError` (one sentence)."""
    if text is None:
        return default
    if not isinstance(text, str):
        raise RecordingError(f"{where} is corrupted ({what} is {describe(text)} where JSON text belongs).")
    try:
        value = json.loads(text)
    except RecursionError:
        raise RecordingError(f"{where} is corrupted ({what} is JSON nested too deep).") from None
    except ValueError:
        raise RecordingError(f"{where} is corrupted ({what} is not valid JSON).") from None
    # No deeper than the brackets it holds: most values are checked by two C-speed counts.
    if (depth is not None and isinstance(value, (list, dict)) and text.count("[") + text.count("{") > depth
            and depth_of(value, depth) > depth):
        raise RecordingError(f"{where} is corrupted ({what} is JSON nested deeper than {depth}).")
    if expect is not None and not isinstance(value, expect):
        if value is None:
            return default
        raise RecordingError(f"{where} is corrupted ({what} is a JSON {type(value).__name__} "
                             f"where a {expect.__name__} belongs).")
    return value


def decompress(data, what: str, where: str, cap: Optional[int] = None) -> bytes:
    """Return the zlib-decompressed ``data`` (``what`` in ``where``); :class:`RecordingError` when it
    is not a blob, does not decompress or would expand beyond ``cap`` bytes (checked while
    decompressing: a 1 MB bomb never takes more than ``cap`` of memory; default
    :data:`MAX_DECOMPRESSED`)."""
    cap = MAX_DECOMPRESSED if cap is None else cap
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RecordingError(f"{where} is corrupted ({what} is {describe(data)} where a compressed blob belongs).")
    d = zlib.decompressobj()
    chunks, total, rest = [], 0, bytes(data)
    try:
        while True:
            # 1 MB at a time: a bomb is refused having expanded to the cap, never further
            out = d.decompress(rest, 1 << 20)
            total += len(out)
            if total > cap:
                raise RecordingError(f"{where} is refused ({what} expands beyond {cap >> 20} MB).")
            chunks.append(out)
            rest = d.unconsumed_tail
            if d.eof or not rest and not out:
                break
        chunks.append(d.flush())
    except zlib.error:
        raise RecordingError(f"{where} is corrupted ({what} does not decompress).") from None
    if not d.eof:
        raise RecordingError(f"{where} is corrupted ({what} is truncated).")
    return b"".join(chunks)


def regular_file(path: str, what: str = "recording") -> os.stat_result:
    """Return ``os.stat(path)``; :class:`RecordingError` unless it is a regular file (checked before
    anything opens it: opening a FIFO would block forever, a device could be read without end)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise RecordingError(f"{path} does not exist.") from None
    except OSError as e:
        raise RecordingError(f"{path} cannot be read ({e.strerror}).") from None
    if stat.S_ISDIR(st.st_mode):
        raise RecordingError(f"{path} is a directory, not a {what}.")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if (
            stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) else "a socket" if stat.S_ISSOCK(
            st.st_mode) else "not a regular file"
        raise RecordingError(f"{path} is {kind}, not a {what}: only regular files are read.")
    return st


def bounded_count(value, what: str, where: str, cap: int = MAX_COUNT) -> Optional[int]:
    """Return ``value`` when it is an integer in 1..``cap`` (a world size, a number of ranks), None
    when it is absent; :class:`RecordingError` for anything else."""
    if value is None:
        return None
    if value.__class__ is not int or not 0 < value <= cap:
        raise RecordingError(f"{where} is corrupted ({what} is {describe(value)} where an integer from 1 to "
                             f"{cap} belongs).")
    return value


def plain_values(values: Iterable, what: str, where: str) -> list:
    """Return ``values`` as a list when each is a plain JSON scalar (text, number, null)."""
    out = list(values)
    for v in out:
        if v.__class__ not in (str, int, float, type(None)) or (v.__class__ is float and not math.isfinite(v)):
            raise RecordingError(f"{where} is corrupted ({what} holds {describe(v)}).")
    return out
