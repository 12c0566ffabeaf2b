"""Compact pass storage (schema 4): a pass's texts as deltas against an earlier pass of its chain,
and a pass's symbol rows as a list of content-addressed row ids.

**Deltas.** Consecutive passes of a chain print and serialize mostly the same symbols. A text is
cut into pieces at a separator (``"\\n"`` for the printed trace, ``'{"'`` for the trace JSON, which
starts every symbol, proxy and source object); the delta is a JSON list of operations, each either
``[start, count]`` (copy ``count`` pieces of the base from ``start``) or a string (a new piece), and
the text is the pieces joined by the separator again. Any text round-trips exactly: a delta only
chooses which pieces it copies. The writer keeps a full snapshot at least every
:data:`MAX_DELTA_CHAIN` passes, so reading a pass never applies more than that many deltas; a chain
of deltas that loops, runs longer, or names a base that is not an earlier stored pass of the chain
is refused with one sentence (:func:`resolve_pass_texts`).

**Symbol row ids.** ``pass_symbols.rows`` is the zlib-compressed text of comma-separated integers:
the first row id, then the difference from each id to the next (mostly ``1``: unchanged symbols
keep the ids given in walk order).
"""
from __future__ import annotations

import json
from bisect import bisect_left
from itertools import accumulate
from typing import Optional

from .budgets import MAX_OBJECTS, TooLarge, count_expanded
from .errors import RecordingError
from .typed import MAX_DECOMPRESSED, decompress, describe, load_json

JSON_SEPARATOR = '{"'
TEXT_SEPARATOR = "\n"
# A pass is stored whole when its chain of deltas would be longer than this (bounded reads).
MAX_DELTA_CHAIN = 8
# The most row ids one pass may list (a pass of the biggest recorded models holds ~100k symbols).
MAX_PASS_ROWS = 5_000_000


def encode_delta(base: str, text: str, sep: str) -> str:
    """Return the delta that turns ``base`` into ``text`` (both cut at ``sep``), as JSON text.
    Greedy and linear: a piece found in the base starts a copy (the first occurrence after the
    previous copy, else the first), which runs while the pieces match."""
    old = base.split(sep)
    where: dict[str, list[int]] = {}
    for i, piece in enumerate(old):
        where.setdefault(piece, []).append(i)
    ops: list = []
    start = count = 0
    nxt = -1  # the base piece the running copy would take next (-1: no copy running)
    n_old = len(old)
    for piece in text.split(sep):
        if count and nxt < n_old and old[nxt] == piece:
            count += 1
            nxt += 1
            continue
        if count:
            ops.append([start, count])
            count = 0
        found = where.get(piece)
        if found:
            j = bisect_left(found, nxt) if nxt >= 0 else 0
            start = found[j] if j < len(found) else found[0]
            count, nxt = 1, start + 1
        else:
            nxt = -1
            ops.append(piece)
    if count:
        ops.append([start, count])
    return json.dumps(ops, separators=(",", ":"), ensure_ascii=False)


def apply_delta(base: str, delta: str, sep: str, what: str, path: str) -> str:
    """Return the text the delta ``delta`` (JSON text, see :func:`encode_delta`) makes of ``base``;
    :class:`RecordingError` naming ``what`` for a damaged delta."""
    # counted before anything is split or parsed: each piece and operation is a Python object
    if base.count(sep) > MAX_OBJECTS or delta.count(",") > 2 * MAX_OBJECTS:
        raise TooLarge(path, what, max(len(base), len(delta)))
    ops = load_json(delta, what, path, list)
    old = base.split(sep)
    n_old = len(old)
    ends = list(accumulate(len(p) + len(sep) for p in old))  # a copy's size, without joining it
    out: list[str] = []
    size = 0
    for op in ops:
        if op.__class__ is str:
            out.append(op)
            size += len(op) + len(sep)
        elif (op.__class__ is list and len(op) == 2 and op[0].__class__ is int and op[1].__class__ is int
              and 0 <= op[0] and 0 < op[1] and op[0] + op[1] <= n_old):
            out.extend(old[op[0]:op[0] + op[1]])
            size += ends[op[0] + op[1] - 1] - (ends[op[0] - 1] if op[0] else 0)
        else:
            raise RecordingError(f"{path} is corrupted ({what} holds {describe(op)} where a delta "
                                 f"operation belongs).")
        if size > MAX_DECOMPRESSED:
            raise RecordingError(f"{path} is refused ({what} expands past {MAX_DECOMPRESSED >> 20} MiB).")
    return sep.join(out)


def encode_ids(ids: list[int]) -> str:
    """Return the ``pass_symbols.rows`` text of a pass's row ids (before compression)."""
    prev = 0
    parts = []
    for i in ids:
        parts.append(str(i - prev))
        prev = i
    return ",".join(parts)


def decode_ids(blob, what: str, path: str, limit: int = MAX_PASS_ROWS) -> list[int]:
    """Return the row ids a ``pass_symbols.rows`` value holds; :class:`RecordingError` for
    anything but a compressed list of positive ids, :class:`~.budgets.TooLarge` for a list of more
    than ``limit`` ids (counted while decompressing, before anything is split)."""
    if not isinstance(blob, bytes):
        raise RecordingError(f"{path} is corrupted ({what} is {describe(blob)} where compressed ids belong).")
    limit = min(limit, MAX_PASS_ROWS)
    commas, size = count_expanded(blob, b",", limit, MAX_DECOMPRESSED)
    if commas + 1 > limit or size > MAX_DECOMPRESSED:
        raise TooLarge(path, what, size, MAX_DECOMPRESSED)
    text = decompress(blob, what, path).decode("ascii", "replace")
    if not text:
        return []
    parts = text.split(",")
    ids, cur = [], 0
    try:
        for p in parts:
            if len(p) > 12:
                raise ValueError(p)
            cur += int(p)
            if cur <= 0:
                raise ValueError(p)
            ids.append(cur)
    except ValueError:
        raise RecordingError(f"{path} is corrupted ({what} is not a list of symbol row ids).") from None
    return ids


def _check_delta_base(path: str, what: str, base, seen: set, later: int, depth: int) -> None:
    """Raise :class:`RecordingError` (one sentence naming the recording at ``path`` and ``what``)
    unless ``base`` can be the delta base of pass ``later``, ``depth`` links down a chain that has
    visited the passes ``seen``: a pass number, not visited, earlier, the chain not too deep."""
    if base.__class__ is not int or base < 0:
        raise RecordingError(f"{path} is corrupted ({what} names {describe(base)} as its delta base).")
    if base in seen:
        raise RecordingError(f"{path} is corrupted ({what} is a delta chain that loops back to pass {base}).")
    if base >= later:
        raise RecordingError(f"{path} is corrupted ({what} is a delta against pass {base}, "
                             "which is not an earlier pass).")
    if depth > MAX_DELTA_CHAIN:
        raise RecordingError(f"{path} is refused ({what} is a chain of more than {MAX_DELTA_CHAIN} "
                             "deltas, which thundervis never writes).")


def resolve_pass_texts(store, graph: int, chain: str, index: int, delta_base, trace_json, printed,
                       what: str, want: str = "both", cache: Optional[dict] = None) -> tuple[Optional[str], Optional[str]]:
    """Return the stored (trace JSON, printed text) of the pass ``index`` of a chain whose row
    holds ``trace_json`` / ``printed`` (as stored) and ``delta_base``: the texts as they were
    before compression (a packed store's references resolved). Follows the chain of deltas down to
    a full snapshot, at most :data:`MAX_DELTA_CHAIN` deep; a chain that loops, runs longer, or
    names a base that is missing, later than the pass or itself a shared pass is one sentence.
    ``want`` ("both", "json" or "printed") names the texts to build; the other comes back None.
    ``cache`` ({(graph, chain, pass, "json" | "printed"): text}, bounded by the caller's
    :func:`remember`) holds texts built before: a pass read after its base applies one delta."""
    kinds = ("json", "printed") if want == "both" else (want,)

    def cached(i):
        got = {k: cache.get((graph, chain, i, k)) for k in kinds} if cache is not None else {}
        return got if got and all(v is not None for v in got.values()) else None

    hit = cached(index)
    if hit is not None:  # built before (a view reads a pass's JSON, then its trace)
        return hit.get("json"), hit.get("printed")
    links = [(index, trace_json, printed)]
    seen = {index}
    base, start = delta_base, None
    while base is not None:
        _check_delta_base(store.path, what, base, seen, links[-1][0], len(links))
        seen.add(base)
        start = cached(base)
        if start is not None:
            break
        rows = store.rows("SELECT trace_json, printed, delta_base FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                          (graph, chain, base))
        if not rows or rows[0][0] is None or rows[0][1] is None:
            raise RecordingError(f"{store.path} is corrupted ({what} is a delta against pass {base}, "
                                 "which holds no trace).")
        links.append((base,) + tuple(rows[0][:2]))
        base = rows[0][2]
    if start is None:  # the last link is a whole snapshot
        _, tj, pr = links.pop()
        start = {"json": store.text(tj, f"the trace of {what}") if "json" in kinds else None,
                 "printed": store.text(pr, f"the printed trace of {what}") if "printed" in kinds else None}
    j_text, p_text = start.get("json"), start.get("printed")
    for i, tj, pr in reversed(links):
        step = f"{what} (delta of pass {i})"
        if j_text is not None:
            j_text = apply_delta(j_text, store.text(tj, f"the trace delta of {step}") or "[]",
                                 JSON_SEPARATOR, f"the trace delta of {step}", store.path)
        if p_text is not None:
            p_text = apply_delta(p_text, store.text(pr, f"the printed delta of {step}") or "[]",
                                 TEXT_SEPARATOR, f"the printed delta of {step}", store.path)
    if cache is not None:
        remember(cache, (graph, chain, index, "json"), j_text)
        remember(cache, (graph, chain, index, "printed"), p_text)
    return j_text, p_text


TEXT_CACHE = 6  # texts a reader keeps for the next delta (a 24-layer joint trace's JSON is ~1 MB)


def remember(cache: dict, key: tuple, text: Optional[str]) -> None:
    """Keep ``text`` in ``cache`` under ``key`` (None: nothing), dropping the oldest beyond TEXT_CACHE."""
    if text is None:
        return
    cache[key] = text
    while len(cache) > TEXT_CACHE:
        try:
            cache.pop(next(iter(cache)))
        except (StopIteration, KeyError, RuntimeError):  # another thread changed it: fine
            break
