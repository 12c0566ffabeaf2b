"""Pass ``fuse``: forms fusion regions on dataflow and turns each into one kernel symbol.

Regions are grown by merging producers into consumers: walking the claimed trace in order, each
symbol claimed by the fusion executor starts a region, and the regions of its producers are merged
into it when (1) the merged region has no path leaving it and coming back (that would be a cycle
once the region is one call), and (2) the executor says it can run the merged region as one kernel
(:meth:`FusionExecutor.region_problem`). Every refused merge keeps its reason; the fusion symbol of
the consumer lists them in its ``note`` (``not fused with ...: <reason>``), and symbols left to
torch keep the claim pass's reason. Regions made only of views move no data and run in torch.

Then regions no value flows between, in either direction and through any path (so merging them
cannot make a cycle), are merged horizontally when the executor can run them as one kernel (each
region is merged with the nearest earlier one that works, within :data:`HORIZONTAL_WINDOW`): one
launch instead of several, e.g. the q/k/v transposes of an attention block or the weight-gradient
sums left over from a layer-norm backward.

Communication ops (collectives and their waits, :mod:`..collectives`) are barriers: a region only
holds symbols between the same two communication ops, so fusing never moves computation across a
collective or its wait, and the final order keeps every communication op where it was.

Each final region becomes a top-level symbol with ``fusion=True``, named by
:func:`~..ir.kernel_name` (``fw_fusion_0``, ``bw_fusion_0``, ``g1_fw_fusion_0`` ...: unique in a
recording; a second fusion executor's pass goes on numbering after the first's) in the order of
their first member, with ``subsymbols`` = the members, ``origin`` = member uids, ``args`` = region
inputs and ``outputs`` = the region's values read outside it. The executor builds each kernel here;
a region whose kernel fails to build goes back to torch with the error as its note. The
:class:`~..ir.KernelRecord` of each kernel (see :func:`kernel_record`) travels in ``trace.kernels``
for the pipeline to report; the pass never mutates its input.
"""
from __future__ import annotations

import heapq
import inspect
from typing import Optional

from ..collectives import is_communication
from ..executors.base import BuiltKernel, FusionExecutor
from .claim import DECOMPOSED
from ..ir import BoundSymbol, KernelRecord, Minter, SourceLine, Trace, TensorProxy, kernel_name

NAME = "fuse"

# Symbols that only reinterpret their input's memory: a region of nothing else moves no data.
VIEW_SYMS = frozenset(f"prims.{n}" for n in ("view", "expand", "permute", "squeeze", "unsqueeze", "alias"))


class _Graph:
    """The contracted dataflow graph: nodes are regions (or single symbols), edges producer ->
    consumer. Merging keeps the node of the consumer."""

    def __init__(self, symbols: tuple[BoundSymbol, ...]):
        producer: dict[str, int] = {}
        self.succ: dict[int, set[int]] = {i: set() for i in range(len(symbols))}
        self.pred: dict[int, set[int]] = {i: set() for i in range(len(symbols))}
        for i, b in enumerate(symbols):
            for p in b.flat_inputs():
                j = producer.get(p.name)
                if j is not None and j != i:
                    self.succ[j].add(i)
                    self.pred[i].add(j)
            for p in b.flat_outputs():
                producer[p.name] = i
        self.node = list(range(len(symbols)))  # symbol index -> node id
        self.members: dict[int, list[int]] = {i: [i] for i in range(len(symbols))}
        # A topological order of the contracted graph (every edge goes up): a path a -> b only
        # passes nodes ordered between them, so searches stay inside that span instead of walking
        # everything downstream (which made fusing quadratic in the trace).
        self.ord: list[int] = list(range(len(symbols)))
        self.steps = 0  # nodes visited by searches: what the tests count to catch quadratic growth

    def has_detour(self, a: int, b: int) -> Optional[int]:
        """Return a node on a path a -> ... -> b through other nodes (None when there is none).

        The search visits nodes in the same order as an unbounded depth-first search, skipping
        only nodes ordered after ``b`` (none of them reaches ``b``), so it names the same node."""
        limit = self.ord[b]
        if self.ord[a] > limit:
            return None
        ord_, succ = self.ord, self.succ
        seen = {a, b}
        stack = [(s, s) for s in succ[a] if s != b and ord_[s] < limit]
        while stack:
            n, first = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            self.steps += 1
            for s in succ[n]:
                if s == b:
                    return first
                if s not in seen and ord_[s] < limit:
                    stack.append((s, first))
        return None

    def _span(self, start: int, edges: dict, inside) -> list[int]:
        """Return the nodes reached from ``start`` along ``edges`` whose order ``inside`` accepts."""
        ord_ = self.ord
        seen, stack = set(), [s for s in edges[start] if inside(ord_[s])]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            self.steps += 1
            stack.extend(s for s in edges[n] if s not in seen and inside(ord_[s]))
        return list(seen)

    def _reorder(self, keep: int, gone: int) -> None:
        """Give the merged node a place in the order before the edges move. Precondition: no path
        joins the two nodes except a direct edge. Between their places, what the earlier one
        reaches moves after the merged node and what reaches the later one moves before it; the
        rest keeps its place."""
        ord_ = self.ord
        u, v = (keep, gone) if ord_[keep] < ord_[gone] else (gone, keep)
        lo, hi = ord_[u], ord_[v]
        after = [n for n in self._span(u, self.succ, lambda o: o < hi) if n != v]
        if not after:
            ord_[keep] = hi
            return
        before = [n for n in self._span(v, self.pred, lambda o: o > lo) if n != u]
        if not before:
            ord_[keep] = lo
            return
        before.sort(key=ord_.__getitem__)
        after.sort(key=ord_.__getitem__)
        slots = sorted([lo, hi] + [ord_[n] for n in before] + [ord_[n] for n in after])
        for n, o in zip(before + [keep], slots):
            ord_[n] = o
        for n, o in zip(after, slots[len(slots) - len(after):]):
            ord_[n] = o

    def merge(self, keep: int, gone: int) -> None:
        """Merge node ``gone`` into node ``keep`` (no path may join them but a direct edge)."""
        self._reorder(keep, gone)
        for s in self.succ.pop(gone):
            self.pred[s].discard(gone)
            if s != keep:
                self.pred[s].add(keep)
                self.succ[keep].add(s)
        for p in self.pred.pop(gone):
            self.succ[p].discard(gone)
            if p != keep:
                self.succ[p].add(keep)
                self.pred[keep].add(p)
        self.succ[keep].discard(keep)
        self.pred[keep].discard(keep)
        moved = self.members.pop(gone)
        for i in moved:
            self.node[i] = keep
        self.members[keep] = sorted(self.members[keep] + moved)


def _describe(b: BoundSymbol) -> str:
    return f"{b.uid} ({b.sym})"


def _region_problem(executor: FusionExecutor, members: list[BoundSymbol], outputs: list) -> Optional[str]:
    """Ask the executor about a region, passing its outputs when its ``region_problem`` takes them."""
    try:
        params = inspect.signature(executor.region_problem).parameters
    except (TypeError, ValueError):
        params = {}
    if len(params) >= 2:
        return executor.region_problem(members, outputs)
    return executor.region_problem(members)


def _form_regions(trace: Trace, executor: FusionExecutor) -> tuple[_Graph, dict, dict]:
    """Return (graph, {node: problem for single symbols the executor refused}, refused merges
    {(producer index, consumer index): reason})."""
    syms = trace.symbols
    g = _Graph(syms)
    mine = {i for i, b in enumerate(syms) if b.executor == executor.name and b.sym != "del" and not b.fusion}
    refused: dict[tuple[int, int], str] = {}
    lone_problem: dict[int, str] = {}
    uses = _uses(trace)
    epoch, barriers = _epochs(syms)
    for i in sorted(mine):
        problem = _region_problem(executor, [syms[i]], _region_io(trace, [i], uses)[1])
        if problem:
            lone_problem[i] = problem
    producer: dict[str, int] = {}
    for i, b in enumerate(syms):
        for q in b.flat_outputs():
            producer.setdefault(q.name, i)
    for c in sorted(mine):
        if c in lone_problem:
            continue
        for p in sorted({producer[q.name] for q in syms[c].flat_inputs() if q.name in producer} - {c}):
            if p not in mine or p in lone_problem:
                continue
            rp, rc = g.node[p], g.node[c]
            if rp == rc:
                continue
            if epoch[g.members[rp][0]] != epoch[g.members[rc][0]]:
                comm = syms[barriers[epoch[g.members[rp][0]]]]
                refused[(p, c)] = f"would move ops across communication op {_describe(comm)}"
                continue
            via = g.has_detour(rp, rc)
            if via is None:
                via = g.has_detour(rc, rp)
            if via is not None:
                refused[(p, c)] = f"would create a cycle through {_describe(syms[g.members[via][0]])}"
                continue
            merged = sorted(g.members[rp] + g.members[rc])
            problem = _region_problem(executor, [syms[i] for i in merged], _region_io(trace, merged, uses)[1])
            if problem:
                refused[(p, c)] = problem
                continue
            g.merge(rc, rp)
    _merge_independent(trace, executor, g, mine, lone_problem, uses, epoch)
    return g, lone_problem, refused


def _epochs(syms: tuple[BoundSymbol, ...]) -> tuple[list[int], list[int]]:
    """Return (per symbol: how many communication ops come before it, the communication ops'
    indices): symbols of one region must share the count (see the module docstring)."""
    epoch, barriers = [], []
    for i, b in enumerate(syms):
        epoch.append(len(barriers))
        if is_communication(b.sym):
            barriers.append(i)
    return epoch, barriers


# How many earlier regions a region may be horizontally merged with (nearest first): keeps the
# search linear and merged regions close in the schedule, so their values do not live much longer.
HORIZONTAL_WINDOW = 16


def _merge_independent(trace: Trace, executor: FusionExecutor, g: _Graph, mine: set, lone_problem: dict,
                       uses: dict, epoch: Optional[list] = None) -> None:
    """Horizontal fusion: merge regions no value flows between (no path either way, so no cycle)
    when the executor can run them as one kernel (side by side, or one after the other)."""
    syms = trace.symbols
    order = []
    for node in sorted(g.members, key=lambda n: g.members[n][0]):
        members = g.members[node]
        if not all(i in mine and i not in lone_problem for i in members):
            continue
        if all(syms[i].sym in VIEW_SYMS for i in members):
            continue  # views stay views: merging them would materialize them
        for q in reversed(order[-HORIZONTAL_WINDOW:]):
            if epoch is not None and epoch[g.members[q][0]] != epoch[members[0]]:
                continue  # never across a communication op
            if q in g.succ[node] or node in g.succ[q] or g.has_detour(q, node) is not None \
                    or g.has_detour(node, q) is not None:
                continue
            merged = sorted(g.members[q] + members)
            if _region_problem(executor, [syms[i] for i in merged], _region_io(trace, merged, uses)[1]) is None:
                g.merge(q, node)
                break
        else:
            order.append(node)


def _uses(trace: Trace) -> dict[str, set[int]]:
    """Return {value name: indices of the symbols reading it}; -1 marks a trace output."""
    uses: dict[str, set[int]] = {}
    for j, b in enumerate(trace.symbols):
        for p in b.flat_inputs():
            uses.setdefault(p.name, set()).add(j)
    for p in trace.flat_outputs():
        uses.setdefault(p.name, set()).add(-1)
    return uses


def _region_io(trace: Trace, members: list[int], uses: Optional[dict] = None) -> tuple[list[TensorProxy], list[TensorProxy]]:
    """Return (inputs read from outside, outputs read outside or returned) of a region."""
    syms = trace.symbols
    uses = _uses(trace) if uses is None else uses
    inside = set(members)
    made: dict[str, TensorProxy] = {}
    inputs: dict[str, TensorProxy] = {}
    for i in members:
        for p in syms[i].flat_inputs():
            if p.name not in made:
                inputs.setdefault(p.name, p)
        for p in syms[i].flat_outputs():
            made[p.name] = p
    outputs = [p for n, p in made.items() if not uses.get(n, set()) <= inside]
    return list(inputs.values()), outputs


def _topo_order(nodes: dict[int, BoundSymbol], succ: dict[int, set[int]], first: dict[int, int]) -> list[int]:
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for s in succ.get(n, ()):
            if s in indeg:
                indeg[s] += 1
    heap = [(first[n], n) for n, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in succ.get(n, ()):
            if s in indeg:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (first[s], s))
    if len(order) != len(nodes):
        raise RuntimeError("fusion produced a cyclic trace")  # guarded against by has_detour
    return order


def fuse(trace: Trace, executor: FusionExecutor) -> Trace:
    """Return ``trace`` with the regions of ``executor``'s symbols replaced by fusion symbols."""
    syms = trace.symbols
    g, lone_problem, refused = _form_regions(trace, executor)
    uses = _uses(trace)
    minter = Minter(trace)
    replaced: dict[int, BoundSymbol] = {}  # node id -> new symbol
    records: list[KernelRecord] = []
    count = sum(1 for b in syms if b.fusion)  # fusions of an earlier fusion executor keep their names
    executor.see_decomposed(trace.meta.get(DECOMPOSED) or {})
    by_member = _refusals_by_member(refused)
    for node in sorted(g.members, key=lambda n: g.members[n][0]):
        members = g.members[node]
        head = syms[members[0]]
        if head.executor != executor.name or head.sym == "del" or head.fusion:
            continue
        if len(members) == 1 and members[0] in lone_problem:
            replaced[node] = _to_torch(head, f"{executor.name} cannot run it here: {lone_problem[members[0]]}")
            continue
        if all(syms[i].sym in VIEW_SYMS for i in members):
            replaced[node] = None
            continue
        inputs, outputs = _region_io(trace, members, uses)
        name = kernel_name(trace.graph, trace.chain, count)
        notes = _refusal_notes(syms, g, refused, members, by_member)
        fusion = BoundSymbol(
            sym=name, args=tuple(inputs), kwargs={}, outputs=tuple(outputs), uid=minter.uid(),
            origin=tuple(syms[i].uid for i in members),
            source=next((syms[i].source for i in members if syms[i].source is not None), None),
            subsymbols=tuple(syms[i] for i in members), executor=executor.name,
            note="; ".join(notes) or None, fusion=True)
        try:
            built = executor.build_kernel(fusion)
        except Exception as e:  # a region whose kernel cannot be built runs in torch
            replaced[node] = None
            for i in members:
                replaced.setdefault(-1 - i, _to_torch(syms[i], f"{executor.name} kernel build failed: "
                                                               f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        count += 1
        replaced[node] = fusion
        records.append(kernel_record(trace, fusion, built, executor))
    out_syms = _rebuild(trace, g, replaced, executor)
    return minter.stamp(trace, symbols=tuple(out_syms), kernels=tuple(records))


def _to_torch(b: BoundSymbol, why: str) -> BoundSymbol:
    return b.replace(executor="torch", note=why)


def _refusals_by_member(refused: dict) -> dict[int, list[tuple[int, int]]]:
    """Return {symbol index: the refused (producer, consumer) pairs it is in}."""
    by_member: dict[int, list[tuple[int, int]]] = {}
    for p, c in refused:
        by_member.setdefault(p, []).append((p, c))
        by_member.setdefault(c, []).append((p, c))
    return by_member


def _refusal_notes(syms, g: _Graph, refused: dict, members: list[int], by_member: Optional[dict] = None) -> list[str]:
    inside = set(members)
    notes = []
    # Only the refusals that touch the region: scanning all of them for every region was
    # quadratic in the trace.
    by_member = _refusals_by_member(refused) if by_member is None else by_member
    keys = sorted({k for i in members for k in by_member.get(i, ())})
    for (p, c), why in ((k, refused[k]) for k in keys):
        if c in inside and p not in inside:
            notes.append(f"not fused with producer {_describe(syms[p])}: {why}")
        elif p in inside and c not in inside and g.node[c] != g.node[p]:
            notes.append(f"not fused with consumer {_describe(syms[c])}: {why}")
    return notes


def _rebuild(trace: Trace, g: _Graph, replaced: dict, executor: FusionExecutor) -> list[BoundSymbol]:
    """Return the new top-level symbols in a topological order close to the original one."""
    syms = trace.symbols
    nodes: dict[int, BoundSymbol] = {}
    expand: dict[int, list[int]] = {}
    for node, members in g.members.items():
        new = replaced.get(node, "keep")
        if isinstance(new, BoundSymbol):
            nodes[node] = new
        elif new == "keep" and len(members) == 1:
            nodes[node] = syms[members[0]]
        else:  # dissolved: views-only region or failed build
            expand[node] = members
    # Dissolved regions become their members again (as separate nodes of the symbol graph).
    succ: dict[int, set[int]] = {}
    first: dict[int, int] = {}
    owner = {}
    for node, members in g.members.items():
        for i in members:
            owner[i] = node if node in nodes else -1 - i
    for node, b in nodes.items():
        first[node] = g.members[node][0]
    for node, members in expand.items():
        for i in members:
            b = replaced.get(-1 - i) or _to_torch(
                syms[i], "claimed by " + executor.name + " but not fused: a region of views only moves no "
                "data, so torch runs it as a view")
            nodes[-1 - i] = b
            first[-1 - i] = i
    producer: dict[str, int] = {}
    for i, b in enumerate(syms):
        for p in b.flat_outputs():
            producer[p.name] = owner[i]
    for n, b in nodes.items():
        for p in b.flat_inputs():
            src = producer.get(p.name)
            if src is not None and src != n:
                succ.setdefault(src, set()).add(n)
    return [nodes[n] for n in _topo_order(nodes, succ, first)]


def kernel_record(trace: Trace, fusion: BoundSymbol, built: BuiltKernel, executor: FusionExecutor) -> KernelRecord:
    """Return the kernel record of a built fusion: ``built`` is what the executor's
    :meth:`~FusionExecutor.build_kernel` returned."""
    region = Trace(name=fusion.sym, inputs=tuple(fusion.args), symbols=fusion.subsymbols,
                   outputs=tuple(fusion.outputs), chain=trace.chain, graph=trace.graph, pass_name=NAME,
                   next_uid=trace.next_uid, next_name=trace.next_name)
    direction = "backward" if trace.chain == "backward" else "forward"
    lines, seen = [], set()
    for s in fusion.subsymbols:
        src = s.source
        if src is None or (src.file, src.line) in seen:
            continue
        seen.add((src.file, src.line))
        lines.append(SourceLine(src.file, src.line, src.code, src.module, direction))
    return KernelRecord(
        name=fusion.sym, executor=executor.name, uid=fusion.uid,
        members=tuple(s.uid for s in fusion.subsymbols), ops=tuple(s.sym for s in fusion.subsymbols),
        code=built.code, language=built.language or executor.language,
        inputs=tuple(fusion.args), outputs=tuple(fusion.outputs), source_lines=tuple(lines),
        region=region, pass_name=NAME, note=built.note, details=dict(built.details))
