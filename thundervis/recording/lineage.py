"""Lineage: follow a symbol (by uid) or a source line through every pass of a graph.

Within a chain a symbol is followed by uid and by ``origin`` links: at each pass, a symbol belongs to
the lineage when its uid is already followed, when one of its origins is, or when it is a
subsymbol of one that is. Across chains, forward and backward are linked by AOTAutograd's ``seq_nr``
(a backward op carries the ``seq_nr`` of the forward op it differentiates) and by the shared source
line; the Dynamo chain is linked by the source line only. The lineage ends in the executor that
runs each surviving symbol at the last pass, and the kernel when that symbol is a fusion.
"""
from __future__ import annotations

import os
from typing import Optional

from .model import (ChainLineage, Lineage, LineageEnd, LineageStep, PassRef, Symbol,
                    SymbolDetail, UnknownItem, chain_position)

# ``rec`` below is a :class:`~.reader.Recording` (not imported: the reader uses this module).
Recording = "Recording"


def _same_file(stored: str, wanted: str) -> bool:
    if not stored:
        return False
    if os.path.isabs(wanted) or os.sep in wanted:
        return (os.path.abspath(wanted) == os.path.abspath(stored)
                or os.path.normpath(stored).endswith(os.sep + os.path.normpath(wanted)))
    return os.path.basename(stored) == wanted


def follow_chain(rec: Recording, graph: int, chain: str, start: set[str], link: str,
                 start_pass: int = 0) -> Optional[ChainLineage]:
    """Follow the uids ``start`` (present at pass ``start_pass``) through the later passes of
    ``chain``; return None when nothing is found."""
    names = {}
    g = rec.graph(graph)
    try:
        for p in g.chain(chain).passes:
            names[p.index] = p.name
    except UnknownItem:
        return None
    by_pass: dict[int, list[Symbol]] = {}
    for s in rec.chain_symbols(graph, chain):
        by_pass.setdefault(s.pass_index, []).append(s)
    followed = set(start)
    steps = []
    for idx in sorted(by_pass):
        if idx < start_pass:
            continue
        hits, hit_uids = [], set()
        for s in by_pass[idx]:  # walk order: a parent comes before its subsymbols
            if (s.uid in followed or (idx > start_pass and followed.intersection(s.origin))
                    or (s.parent is not None and s.parent in hit_uids)):
                hits.append(s)
                hit_uids.add(s.uid)
        followed |= hit_uids
        top = tuple(s for s in hits if s.parent is None)
        steps.append(LineageStep(idx, names.get(idx, "?"), top, len(hits) - len(top)))
    if not any(st.symbols for st in steps):
        return None
    kernels = {k.uid: k for k in g.kernels if k.chain == chain and k.uid}
    by_name = {k.name: k for k in g.kernels if k.chain == chain}
    last = steps[-1].symbols if steps else ()
    ends = tuple(LineageEnd(s, s.executor, kernels.get(s.uid) or by_name.get(s.sym)) for s in last)
    return ChainLineage(chain, link, tuple(steps), ends)


def _first_pass(symbols: list[Symbol]) -> dict[str, tuple[int, set[str]]]:
    """Map chain -> (earliest pass, uids at that pass) for ``symbols``."""
    out: dict[str, tuple[int, set[str]]] = {}
    for s in symbols:
        cur = out.get(s.chain)
        if cur is None or s.pass_index < cur[0]:
            out[s.chain] = (s.pass_index, {s.uid})
        elif s.pass_index == cur[0]:
            cur[1].add(s.uid)
    return out


def _line_of(s: Symbol) -> Optional[tuple[str, int]]:
    return (s.source.file, s.source.line) if s.source is not None and s.source.line else None


def _twins(rec: Recording, graph: int, chain: str, seq_lines: dict[int, set]) -> set[str]:
    """Return the uids of ``chain``'s acquired symbols carrying one of the seq_nrs of ``seq_lines``
    and coming from one of that seq_nr's source lines (or with no source on either side).

    AOTAutograd gives the ops that differentiate a forward op its ``seq_nr`` and its stack trace,
    but it also gives one ``seq_nr`` to every backward op that merely accumulates gradients (the
    adds of a residual stream, each with the line of its own use): the line filters those out, so
    a query on one line does not pull every fusion holding one of those adds."""
    out = set()
    for s in rec.symbols(graph, chain, 0):
        lines = seq_lines.get(s.seq_nr) if s.seq_nr is not None else None
        if lines is None:
            continue
        line = _line_of(s)
        if line is None or None in lines or line in lines:
            out.add(s.uid)
    return out


def _assemble(rec: Recording, graph: int, query: str, source,
              starts: dict[str, tuple[int, set[str], str]]) -> Lineage:
    """Link the other chains by seq_nr to the ``starts`` and follow every chain."""
    seq: dict[int, set] = {}  # seq_nr -> source lines of the symbols that carry it
    for chain, (p, uids, _) in starts.items():
        for s in rec.symbols(graph, chain, p):
            if s.uid in uids and s.seq_nr is not None:
                seq.setdefault(s.seq_nr, set()).add(_line_of(s))
    chains = []
    present = {c.kind for c in rec.graph(graph).chains}
    for chain in sorted(present, key=chain_position):
        p, uids, link = starts.get(chain, (0, set(), ""))
        if chain != "dynamo" and seq and link != "the symbol":
            twins = _twins(rec, graph, chain, seq) - uids
            if twins and p == 0:
                uids = uids | twins
                nrs = sorted({s.seq_nr for s in rec.symbols(graph, chain, 0) if s.uid in twins})
                link = ", ".join(x for x in (link, "seq_nr " + " ".join(map(str, nrs))) if x)
        if uids:
            cl = follow_chain(rec, graph, chain, uids, link, p)
            if cl is not None:
                chains.append(cl)
    return Lineage(graph, query, source, tuple(chains))


def lineage_of_uid(rec: Recording, graph: int, uid: str) -> Lineage:
    """Return the lineage of symbol ``uid`` in ``graph`` (and its twins in the other chains)."""
    rec.graph(graph)
    found = rec.symbols_with_uid(graph, uid)
    if not found:
        raise UnknownItem(f"graph {graph} has no symbol with uid {uid!r} "
                          "(`thundervis show --uids` prints them)")
    starts = {c: (p, uids, "the symbol") for c, (p, uids) in _first_pass(found).items()}
    first = min(found, key=lambda s: s.pass_index)
    return _assemble(rec, graph, f"uid {uid}", first.source, starts)


def lineage_of_source(rec: Recording, file: str, line: int, graph: Optional[int] = None) -> list[Lineage]:
    """Return the lineage of every symbol that comes from ``file:line``, one per graph that has
    some (only ``graph`` when given)."""
    if graph is not None:
        rec.graph(graph)
    found = [s for s in rec.symbols_at_line(line, graph) if s.source and _same_file(s.source.file, file)]
    if not found:
        where = f"graph {graph}" if graph is not None else "any graph"
        raise UnknownItem(f"no symbol in {where} comes from {file}:{line}")
    out = []
    for g in sorted({s.graph for s in found}):
        mine = [s for s in found if s.graph == g]
        starts = {c: (p, uids, "source line") for c, (p, uids) in _first_pass(mine).items()}
        out.append(_assemble(rec, g, f"{file}:{line}", mine[0].source, starts))
    return out


def symbol_detail(rec: Recording, ref: PassRef, uid: str) -> SymbolDetail:
    """Return everything a view shows about symbol ``uid`` of pass ``ref`` (see
    :class:`~thundervis.recording.model.SymbolDetail`)."""
    here = rec.symbols(ref)
    sym = next((s for s in here if s.uid == uid), None)
    if sym is None:
        raise UnknownItem(f"{ref} has no symbol with uid {uid!r} (`thundervis show --uids` prints them)")
    graph = rec.graph(ref.graph)
    chain = graph.chain(ref.chain)
    indexes = [p.index for p in chain.passes]
    pos = indexes.index(ref.index) if ref.index in indexes else -1
    came_from: tuple[Symbol, ...] = ()
    became: tuple[Symbol, ...] = ()
    if pos > 0:
        wanted = set(sym.origin) | {sym.uid}
        came_from = tuple(s for s in rec.symbols(PassRef(ref.graph, ref.chain, indexes[pos - 1]))
                          if s.uid in wanted)
    if 0 <= pos < len(indexes) - 1:
        became = tuple(s for s in rec.symbols(PassRef(ref.graph, ref.chain, indexes[pos + 1]))
                       if s.parent is None and (s.uid == sym.uid or sym.uid in s.origin))
    followed = follow_chain(rec, ref.graph, ref.chain, {sym.uid}, "the symbol", ref.index)
    ends = followed.ends if followed is not None else ()
    kernels = {k.uid: k for k in graph.kernels if k.chain == ref.chain and k.uid}
    by_name = {k.name: k for k in graph.kernels if k.chain == ref.chain}
    kernel = kernels.get(sym.uid) or by_name.get(sym.sym) or next((e.kernel for e in ends if e.kernel), None)
    twins: tuple[Symbol, ...] = ()
    if sym.seq_nr is not None and ref.chain in ("forward", "backward"):
        other = "backward" if ref.chain == "forward" else "forward"
        if any(c.kind == other for c in graph.chains):
            twins = tuple(s for s in rec.symbols(PassRef(ref.graph, other, 0)) if s.seq_nr == sym.seq_nr)
    timing = kernel.timing if kernel is not None else None
    if timing is None:
        end_uids = {e.symbol.uid for e in ends} | {sym.uid}
        timing = next((t for t in graph.timings.for_chain(ref.graph, ref.chain) if t.uid in end_uids), None)
    fallback = None
    for s in (sym,) + tuple(e.symbol for e in ends):
        if s.note and (s.executor in (None, "torch")):
            fallback = s.note
            break
    return SymbolDetail(symbol=sym, source=sym.source, module=(sym.source.module or None) if sym.source else None,
                        snippet=rec.source_snippet(sym.source), came_from=came_from, became=became,
                        ends=tuple(e.symbol for e in ends), kernel=kernel, twins=twins, timing=timing,
                        fallback=fallback)
