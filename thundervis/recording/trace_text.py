"""The text a recording stores for each pass, cached across the passes of a chain.

:class:`TraceTextCache` produces exactly ``trace_to_json(trace)`` (through the compiler's memoised
:class:`~thundervis.compiler.serialize.TraceEncoder`, the one trace JSON encoder),
``print_trace(trace)`` and the ``symbols`` rows of :func:`symbol_rows`, reusing the text of every
piece a pass did not change. Traces are immutable and passes return the symbols they keep as the
same objects, so most of a chain's symbols are encoded, printed and indexed once instead of once per
pass. This is most of the recording's cost during a compile.
"""
from __future__ import annotations

import json

from thundervis.compiler.ir import Trace
from thundervis.compiler.printer import print_trace
from thundervis.compiler.serialize import TraceEncoder


class TraceTextCache:
    """``trace_to_json``, ``print_trace`` and the ``symbols`` rows of a trace, each memoised by
    object identity across the passes of one chain (see the module docstring). Each cache entry
    keeps the object it describes alive, so an id is never reused while its entry exists."""

    def __init__(self):
        self._json = TraceEncoder()
        # (graph, chain) -> {"row": {id: (obj, parent, rows)}, "print": printer memo}
        self._cache: dict[tuple, dict] = {}

    def _chain_cache(self, trace: Trace) -> dict:
        key = (trace.graph, trace.chain)
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = {"row": {}, "print": {}}
        return c

    def print(self, trace: Trace) -> str:
        """Return ``print_trace(trace)``."""
        return print_trace(trace, memo=self._chain_cache(trace)["print"])

    def to_json(self, trace: Trace) -> str:
        """Return ``trace_to_json(trace)``."""
        return self._json.to_json(trace)

    def symbol_rows(self, graph: int, chain: str, index: int, trace: Trace) -> list[tuple]:
        """Return one ``symbols`` row per bound symbol of ``trace`` (subsymbols included, ``del``
        statements skipped: they carry no provenance), as :func:`symbol_rows` does."""
        cache = self._chain_cache(trace)["row"]
        rows = []
        for b in trace.symbols:
            if b.sym == "del":
                continue
            for tail in self._row_tails(b, None, cache):
                rows.append((graph, chain, index, len(rows)) + tail)
        return rows

    def _row_tails(self, b, parent, cache: dict) -> list[tuple]:
        """The rows of ``b`` and its subsymbols without their (graph, chain, pass, position)."""
        hit = cache.get(id(b))
        if hit is not None and hit[0] is b and hit[1] == parent:
            return hit[2]
        s = b.source
        tails = [(b.uid, parent, b.sym, _origin_text(b.origin),
                  s.file if s else None, s.line if s else None, s.code if s else None,
                  s.module if s else None, s.function if s else None, b.seq_nr, b.aten,
                  b.executor, b.note)]
        for sub in b.subsymbols:
            if sub.sym != "del":
                tails.extend(self._row_tails(sub, b.uid, cache))
        cache[id(b)] = (b, parent, tails)
        return tails

    def forget(self, graph: int, chain: str) -> None:
        """Drop the caches of a chain that finished."""
        self._cache.pop((graph, chain), None)
        self._json.forget(graph, chain)


_str = json.encoder.encode_basestring_ascii


def _origin_text(origin) -> str:
    """Return ``json.dumps(list(origin))`` (a list of uids), without json.dumps's overhead."""
    if all(type(x) is str for x in origin):
        return "[" + ", ".join([_str(x) for x in origin]) + "]"
    return json.dumps(list(origin))


def symbol_rows(graph: int, chain: str, index: int, trace: Trace):
    """Yield one ``symbols`` row per bound symbol of ``trace`` (subsymbols included, ``del``
    statements skipped: they carry no provenance)."""
    position = 0
    stack = [(b, None) for b in reversed(trace.symbols)]
    while stack:
        b, parent = stack.pop()
        if b.sym != "del":
            s = b.source
            yield (graph, chain, index, position, b.uid, parent, b.sym, json.dumps(list(b.origin)),
                   s.file if s else None, s.line if s else None, s.code if s else None,
                   s.module if s else None, s.function if s else None, b.seq_nr, b.aten,
                   b.executor, b.note)
            position += 1
            stack.extend((sub, b.uid) for sub in reversed(b.subsymbols))
