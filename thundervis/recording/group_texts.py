"""What ranks of a group share, computed over their recordings: the canonical form of a pass's
trace (without what differs between ranks), the per-pass trace hashes that say whether two ranks
compiled identical traces, and the texts a packed rank file misses. Group code: it reads through
:class:`~.reader.Recording` and its store, above the reader.
"""
from __future__ import annotations

import json
from typing import Optional

from .packed_store import STORE_NAME, fingerprint, ref_fp, walk_symbols


def canonical_trace(trace_json: str) -> tuple[str, int]:
    """Return (a pass's trace JSON without what differs between ranks that compiled the same
    trace, the seq_nr offset taken out). Its ``meta`` (durations) is dropped; autograd's
    ``seq_nr`` counts every autograd op the process ran before, so it is stored relative to the
    smallest one of the pass (the offset goes in the reference and is added back on reading)."""
    d = json.loads(trace_json)
    if not isinstance(d, dict):
        raise ValueError("a trace is a JSON object")
    d.pop("meta", None)
    seqs = [b["seq_nr"] for b in walk_symbols(d.get("symbols")) if b.get("seq_nr").__class__ is int]
    offset = min(seqs) if seqs else 0
    if offset:
        for b in walk_symbols(d.get("symbols")):
            if b.get("seq_nr").__class__ is int:
                b["seq_nr"] -= offset
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False), offset


def canonical_trace_json(trace_json: str) -> str:
    """Return the canonical form of a pass's trace JSON (see :func:`canonical_trace`)."""
    return canonical_trace(trace_json)[0]


def trace_hashes(rec) -> list[tuple]:
    """Return (graph, chain, index, pass name, fingerprint of its canonical trace JSON) for every
    pass of the recording ``rec``, packed or not: equal lists mean identical traces."""
    store = rec.store
    out, held = [], {}
    delta = ", delta_base" if rec.schema_version >= 4 else ", NULL"
    rows = store.rows(f"SELECT graph_id, chain, idx, name, symbols_from, trace_json{delta} FROM passes"
                      " ORDER BY graph_id, chain, idx")
    for g, c, i, name, src, tj, base in rows:
        fp = None
        if tj is not None:
            fp = ref_fp(tj) if store.is_reference(tj) else None
            if fp is None:
                try:  # schema 4: a delta-stored pass's whole JSON comes from the reader
                    text = (rec.pass_json(g, c, i) if base is not None
                            else store.text(tj, f"the trace of graph {g} {c} pass {i}"))
                    fp = fingerprint(canonical_trace_json(text))
                except (ValueError, RecursionError):
                    fp = "damaged"
            held[(g, c, i)] = fp
        else:
            fp = held.get((g, c, src), "missing")
        out.append((g, c, i, name, fp))
    return out


def listing_hashes(rec) -> list[tuple]:
    """Return (graph, chain, index, pass name, key) for every pass of the recording ``rec``, as
    cheap as a group listing needs (``ls GROUP`` of thousands of unpacked ranks): the final pass of
    each chain keyed by the fingerprint of its canonical trace (what the rank ran, as
    :func:`trace_hashes` keys it), every other pass by its shape (changed, symbol count, which pass
    its trace is held by), read from the passes table without decoding its trace. Equal lists: the
    ranks ran identical traces through passes of the same shape (``diff --ranks`` compares every
    pass's trace with :func:`trace_hashes`)."""
    rows = rec.store.rows("SELECT graph_id, chain, idx, name, changed, n_symbols, symbols_from FROM passes"
                          " ORDER BY graph_id, chain, idx")
    last = {}
    for g, c, i, *_ in rows:
        last[(g, c)] = i
    out = []
    for g, c, i, name, changed, n, src in rows:
        if last[(g, c)] == i:
            key = _final_key(rec, g, c, i, src)
        else:
            key = f"shape {changed!r} {n!r} {src!r}"
        out.append((g, c, i, name, key))
    return out


def _final_key(rec, g: int, c: str, i: int, src) -> str:
    """The fingerprint of the canonical trace pass ``i`` holds (a packed rank's reference names it
    without reading the group's store, as in :func:`trace_hashes`)."""
    store = rec.store
    for idx in dict.fromkeys((i, src)):
        held = store.rows("SELECT trace_json FROM passes WHERE graph_id=? AND chain=? AND idx=?", (g, c, idx))
        tj = held[0][0] if held else None
        if tj is not None:
            fp = ref_fp(tj) if store.is_reference(tj) else None
            if fp is not None:
                return fp
            break
    try:
        return fingerprint(canonical_trace_json(rec.pass_json(g, c, i)))
    except (ValueError, RecursionError):
        return "damaged"


def missing_blobs(rec, cache: Optional[dict] = None) -> list[str]:
    """Return what a packed rank file refers to but cannot find (empty when complete): one line
    per missing kind, e.g. ``traces.tvstore (42 texts)``. ``cache`` (shared by the ranks of one
    group) keeps the store's fingerprints once read."""
    store = rec.store
    if store.kind == "file":
        return []
    fps = set()
    for (tj, pr) in store.rows("SELECT trace_json, printed FROM passes"):
        fps.update(f for f in (ref_fp(tj), ref_fp(pr)) if f)
    for (code, tj) in store.rows("SELECT code, trace_json FROM kernels"):
        fps.update(f for f in (ref_fp(code), ref_fp(tj)) if f)
    if store.has_table("sources"):
        fps.update(f for (t,) in store.rows("SELECT text FROM sources") if (f := ref_fp(t)))
    if not fps:
        return []
    key = ("store fingerprints", store.store_path)
    have = cache.get(key) if cache is not None else None
    if have is None:
        have = store.stored_fingerprints()
        if have is None:
            return [f"{STORE_NAME} ({len(fps)} texts: traces, kernel code, sources)"]
        if cache is not None:
            cache[key] = have
    lost = len(fps - have)
    return [f"{STORE_NAME} lacks {lost} of {len(fps)} texts"] if lost else []
