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
from .fuse_graph import FusionGraph as _Graph

NAME = "fuse"

# Symbols that only reinterpret their input's memory: a region of nothing else moves no data.
VIEW_SYMS = frozenset(f"prims.{n}" for n in ("view", "expand", "permute", "squeeze", "unsqueeze", "alias"))


def _describe(b: BoundSymbol) -> str:
    return f"{b.uid} ({b.sym})"


_TAKES_OUTPUTS: dict = {}  # region_problem function -> whether it takes the outputs (asked per merge)


def _region_problem(executor: FusionExecutor, members: list[BoundSymbol], outputs: list) -> Optional[str]:
    """Ask the executor about a region, passing its outputs when its ``region_problem`` takes them."""
    method = executor.region_problem
    fn = getattr(method, "__func__", None)
    takes = _TAKES_OUTPUTS.get(fn) if fn is not None else None
    if takes is None:
        try:
            takes = len(inspect.signature(method).parameters) >= 2
        except (TypeError, ValueError):
            takes = False
        if fn is not None:
            _TAKES_OUTPUTS[fn] = takes
    if takes:
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
    outs = [b.flat_outputs() for b in syms]  # asked for every candidate region: once per symbol
    epoch, barriers = _epochs(syms)
    for i in sorted(mine):
        problem = _region_problem(executor, [syms[i]], _region_outputs(outs, [i], uses))
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
            problem = _region_problem(executor, [syms[i] for i in merged], _region_outputs(outs, merged, uses))
            if problem:
                refused[(p, c)] = problem
                continue
            g.merge(rc, rp)
    _merge_independent(trace, executor, g, mine, lone_problem, uses, epoch, outs)
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
                       uses: dict, epoch: Optional[list] = None, outs: Optional[list] = None) -> None:
    """Horizontal fusion: merge regions no value flows between (no path either way, so no cycle)
    when the executor can run them as one kernel (side by side, or one after the other)."""
    syms = trace.symbols
    outs = [b.flat_outputs() for b in syms] if outs is None else outs
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
            if _region_problem(executor, [syms[i] for i in merged], _region_outputs(outs, merged, uses)) is None:
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
    outs = {i: syms[i].flat_outputs() for i in members}
    made: set[str] = set()
    inputs: dict[str, TensorProxy] = {}
    for i in members:
        for p in syms[i].flat_inputs():
            if p.name not in made:
                inputs.setdefault(p.name, p)
        made.update(p.name for p in outs[i])
    return list(inputs.values()), _region_outputs(outs, members, uses)


_NO_USES = frozenset()


def _region_outputs(outs: list, members: list[int], uses: dict) -> list[TensorProxy]:
    """Return the outputs of a region: its values read outside it or returned (``outs``: each
    symbol's flat outputs, by index; ``uses`` as :func:`_uses` returns)."""
    inside = set(members)
    made: dict[str, TensorProxy] = {}
    for i in members:
        for p in outs[i]:
            made[p.name] = p
    return [p for n, p in made.items() if not uses.get(n, _NO_USES) <= inside]


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
