"""Run comparison: two recordings (say before and after a compiler change, or with different
executors), compared graph by graph and fusion by fusion.

Generated names (``fw_fusion_3``) are not identity: two runs may number kernels differently.
A fusion is identified by its chain, its op sequence and the source lines (and module paths) its ops
come from. Fusions with equal identity are the same fusion (perhaps now run by another executor).
The rest are grouped by the fused ops they share (an op is its module, source line, op name and
occurrence), which tells a split (one before, several after), a merge (several before, one after),
a change (one each), an added and a removed fusion apart.

The comparison works on :class:`RunSide` values (final traces, signatures, timings); build them
from recordings with :func:`run_side_from_recording`, or from traces directly in tests.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

from thundervis.compiler.ir import BoundSymbol, Trace
from thundervis.present.units import format_us

from .graph_match import match_graphs
from .paths import PathComparison, compare_paths, fusion_paths
from .lines import is_fusion

SAME, EXECUTOR, CHANGED, SPLIT, MERGED, REGROUPED, ADDED, REMOVED = (
    "same", "executor-changed", "changed", "split", "merged", "regrouped", "added", "removed")
KINDS = (SAME, EXECUTOR, CHANGED, SPLIT, MERGED, REGROUPED, ADDED, REMOVED)
_COMPARED_CHAINS = ("forward", "backward", "inference")


@dataclass(frozen=True)
class FusionInfo:
    """One fusion of one run: where (graph, chain), its name and executor, the member ops and the
    source locations they come from, its identity ``key``, fused-op ``atoms`` and median time."""

    graph: int
    chain: str
    name: str
    executor: str
    ops: tuple[str, ...]
    sources: tuple[str, ...]
    key: tuple
    atoms: tuple
    time_us: Optional[float] = None

    def describe(self) -> str:
        """Return ``fw_fusion_2 [mul, add] (gpt.py:40, gpt.py:41)``."""
        ops = ", ".join(o.removeprefix("prims.") for o in self.ops[:6]) + (", …" if len(self.ops) > 6 else "")
        labels = list(dict.fromkeys(s.split(" [")[0] for s in self.sources))
        src = ", ".join(labels[:3]) + (", …" if len(labels) > 3 else "")
        return f"{self.name} [{ops}]" + (f" ({src})" if src else "")

    def as_json(self) -> dict:
        """Return the fusion as a JSON-able dict."""
        return {"graph": self.graph, "chain": self.chain, "name": self.name, "executor": self.executor,
                "ops": list(self.ops), "sources": list(self.sources), "time_us": self.time_us}


@dataclass
class GraphSide:
    """One compiled graph of a run: ``signature`` (what was compiled, independent of executors),
    its source locations, the final trace per chain, kernel times (``(chain, name) -> µs``) and each
    chain's wall time per call (``chain -> µs``: the untimed calls of ``run --profile``)."""

    id: int
    signature: str
    sources: frozenset
    finals: dict[str, Trace]
    timings: dict = field(default_factory=dict)
    chain_walls: dict = field(default_factory=dict)  # chain -> median wall time per call (µs), profiled runs
    too_large: frozenset = frozenset()  # chains whose final trace is too large to show: not compared


@dataclass
class RunSide:
    """One run to compare: a label (usually the recording path), the script, executors, graphs."""

    label: str
    script: Optional[str]
    executors: Optional[list]
    graphs: list[GraphSide]
    paths: dict = field(default_factory=dict)  # (graph, chain, kernel) -> "cpu via torch" (diff.paths)
    left_out: tuple = ()  # one sentence per trace too large to show: its chain is not compared


def _src_label(b: BoundSymbol) -> str:
    s = b.source
    if s is None:
        return "?"
    return f"{s.label()} [{s.module}]" if s.module else s.label()


def graph_signature(acquired: Trace) -> tuple[str, frozenset]:
    """Return (signature, source locations) of an acquired trace: the op sequence and source lines,
    which do not depend on executors."""
    h = hashlib.blake2b(digest_size=12)
    sources = set()
    for b in acquired.symbols:
        lab = _src_label(b)
        sources.add(lab)
        h.update(f"{b.sym}|{lab}\x1e".encode())
    return h.hexdigest(), frozenset(sources)


def fusions_of_trace(trace: Trace, graph: int = 0, timings: Optional[dict] = None) -> list[FusionInfo]:
    """Return the fusions of a final trace with identity keys and atoms (``timings``: ``(chain,
    kernel name) -> µs``)."""
    timings = timings or {}
    seen_atoms: dict[tuple, int] = {}
    seen_keys: dict[tuple, int] = {}
    out = []
    for b in trace.symbols:
        if not is_fusion(b):
            continue
        ops = tuple(s.sym for s in b.subsymbols)
        srcs = tuple(dict.fromkeys(_src_label(s) for s in b.subsymbols))
        atoms = []
        for s in b.subsymbols:
            a = (trace.chain, _src_label(s), s.sym)
            n = seen_atoms.get(a, 0)
            seen_atoms[a] = n + 1
            atoms.append(a + (n,))
        base = (trace.chain, ops, srcs)
        n = seen_keys.get(base, 0)
        seen_keys[base] = n + 1
        out.append(FusionInfo(graph, trace.chain, b.sym, b.executor or "?", ops, srcs, base + (n,),
                              tuple(atoms), timings.get((trace.chain, b.sym))))
    return out


@dataclass
class FusionChange:
    """What became of a group of fusions between the runs (``kind`` one of :data:`KINDS`)."""

    kind: str
    chain: str
    graph_a: Optional[int]
    graph_b: Optional[int]
    a: list[FusionInfo]
    b: list[FusionInfo]

    @property
    def time_a_us(self) -> Optional[float]:
        """Total median time of the before fusions, when all are timed."""
        return _total(self.a)

    @property
    def time_b_us(self) -> Optional[float]:
        """Total median time of the after fusions, when all are timed."""
        return _total(self.b)

    def describe(self) -> str:
        """Return one line saying what changed."""
        left = " + ".join(f.describe() for f in self.a) or "(unfused)"
        right = " + ".join(f.describe() for f in self.b) or "(unfused)"
        if self.kind == ADDED:
            return f"added {right}"
        if self.kind == REMOVED:
            return f"removed {left}: its ops run unfused now"
        if self.kind == EXECUTOR:
            return f"{left}: executor {self.a[0].executor} -> {self.b[0].executor} ({self.b[0].name})"
        return f"{self.kind} {left} -> {right}"

    def as_json(self) -> dict:
        """Return the change as a JSON-able dict."""
        return {"kind": self.kind, "chain": self.chain, "graph_a": self.graph_a, "graph_b": self.graph_b,
                "a": [f.as_json() for f in self.a], "b": [f.as_json() for f in self.b],
                "time_a_us": self.time_a_us, "time_b_us": self.time_b_us}


def _total(fs: list[FusionInfo]) -> Optional[float]:
    if not fs or any(f.time_us is None for f in fs):
        return None
    return sum(f.time_us for f in fs)


@dataclass
class RunComparison:
    """The result of :func:`compare_runs`."""

    a: str
    b: str
    same_script: bool
    graph_pairs: list[tuple[int, int, str]]  # (graph in a, graph in b, "identical" | "similar")
    graphs_only_a: list[int]
    graphs_only_b: list[int]
    changes: list[FusionChange]
    notes: list[str]
    # Matched graphs' chains timed in both runs: graph in a and in b, chain, wall µs per call in each.
    chain_walls: list[tuple[int, int, str, float, float]] = field(default_factory=list)
    paths: Optional[PathComparison] = None  # which path (torch, Inductor) ran the fusions in each run

    def differences(self) -> list[FusionChange]:
        """Return the changes other than ``same``."""
        return [c for c in self.changes if c.kind != SAME]

    def counts(self) -> dict[str, int]:
        """Return the number of changes per kind (all kinds, zeros included)."""
        out = dict.fromkeys(KINDS, 0)
        for c in self.changes:
            out[c.kind] += 1
        return out

    def match_stats(self) -> dict:
        """Return how much could be matched: graphs, fusions (same identity) and fused ops."""
        n_a = sum(len(c.a) for c in self.changes)
        n_b = sum(len(c.b) for c in self.changes)
        same = sum(len(c.a) for c in self.changes if c.kind in (SAME, EXECUTOR))
        atoms_a = {x for c in self.changes for f in c.a for x in f.atoms}
        atoms_b = {x for c in self.changes for f in c.b for x in f.atoms}
        union = atoms_a | atoms_b
        ga = len(self.graph_pairs) + len(self.graphs_only_a)
        gb = len(self.graph_pairs) + len(self.graphs_only_b)
        return {"graphs_matched": len(self.graph_pairs), "graphs_a": ga, "graphs_b": gb,
                "fusions_a": n_a, "fusions_b": n_b, "fusions_matched": same,
                "fused_ops_shared": len(atoms_a & atoms_b), "fused_ops_total": len(union),
                "fused_ops_shared_fraction": (len(atoms_a & atoms_b) / len(union)) if union else 1.0}

    def timing_deltas(self) -> list[dict]:
        """Return per-change timing deltas where both sides have times (µs, ratio b/a)."""
        out = []
        for c in self.changes:
            ta, tb = c.time_a_us, c.time_b_us
            if ta is None or tb is None:
                continue
            out.append({"kind": c.kind, "chain": c.chain, "graph_a": c.graph_a, "graph_b": c.graph_b,
                        "a": [f.name for f in c.a], "b": [f.name for f in c.b], "a_us": ta, "b_us": tb,
                        "delta_us": tb - ta, "ratio": (tb / ta) if ta else None})
        return out

    def chain_time_deltas(self) -> list[dict]:
        """Return the wall time per call of each chain timed in both runs (µs, ratio b/a): the
        end-to-end number, kernels and everything between them (``run --profile``'s untimed calls)."""
        return [{"graph_a": ia, "graph_b": ib, "chain": chain, "a_us": ta, "b_us": tb, "delta_us": tb - ta,
                 "ratio": (tb / ta) if ta else None} for ia, ib, chain, ta, tb in self.chain_walls]

    def as_json(self) -> dict:
        """Return the whole comparison as a JSON-able dict (``thundervis diff A B --json``)."""
        return {"a": self.a, "b": self.b, "same_script": self.same_script,
                "graphs": [{"a": ga, "b": gb, "match": how} for ga, gb, how in self.graph_pairs],
                "graphs_only_a": self.graphs_only_a, "graphs_only_b": self.graphs_only_b,
                "counts": self.counts(), "match": self.match_stats(),
                "differences": [c.as_json() for c in self.differences()],
                "timing_deltas": self.timing_deltas(), "chain_time_deltas": self.chain_time_deltas(),
                "paths": self.paths.as_json() if self.paths is not None else None, "notes": self.notes}

    def render_text(self) -> str:
        """Return the comparison as plain text for the terminal."""
        st = self.match_stats()
        out = [f"A: {self.a}", f"B: {self.b}"]
        out += [f"note: {n}" for n in self.notes]
        out.append(f"graphs: {st['graphs_matched']} matched of {st['graphs_a']} in A and {st['graphs_b']} in B"
                   + (f"; only in A: {_ids(self.graphs_only_a)}" if self.graphs_only_a else "")
                   + (f"; only in B: {_ids(self.graphs_only_b)}" if self.graphs_only_b else ""))
        out.append(f"fusions: {st['fusions_a']} in A, {st['fusions_b']} in B, {st['fusions_matched']} matched; "
                   f"fused ops shared: {st['fused_ops_shared']} of {st['fused_ops_total']}")
        diffs = self.differences()
        paths = self.paths.lines() if self.paths is not None else []
        if not diffs:  # the same fusions can still run through other paths (torch, Inductor)
            out.append("no fusion differences" + (" in what was fused" if paths else ""))
        else:
            c = self.counts()
            out.append("differences: " + ", ".join(f"{c[k]} {k}" for k in KINDS if k != SAME and c[k]))
            for d in diffs:
                where = f"graph {d.graph_a if d.graph_a is not None else d.graph_b} {d.chain}"
                out.append(f"  {where}: {d.describe()}")
        out += paths
        deltas = self.timing_deltas()
        if deltas:
            out.append("kernel time (median µs)   A -> B   delta")
            for t in deltas:
                out.append(f"  graph {t['graph_a']} {t['chain']} {' + '.join(t['a'])} -> {' + '.join(t['b'])}: "
                           f"{t['a_us']:.1f} -> {t['b_us']:.1f}  {t['delta_us']:+.1f}")
        chains = self.chain_time_deltas()
        if chains:
            out.append("chain time per call (wall, median)   A -> B   B/A")
            for t in chains:
                where = f"graph {t['graph_a']}" + (f"/{t['graph_b']}" if t["graph_b"] != t["graph_a"] else "")
                ratio = f"{t['ratio']:.2f}x" if t["ratio"] is not None else "-"
                out.append(f"  {where} {t['chain']}: {format_us(t['a_us'])} -> {format_us(t['b_us'])}  {ratio}")
        return "\n".join(out) + "\n"


def _ids(xs, n: int = 12) -> str:
    return ", ".join(str(x) for x in xs[:n]) + (f", … ({len(xs)} in all)" if len(xs) > n else "")


def compare_fusions(fa: list[FusionInfo], fb: list[FusionInfo], chain: str,
                    graph_a: Optional[int], graph_b: Optional[int]) -> list[FusionChange]:
    """Return the changes between the fusions of one chain in two runs (see module doc)."""
    out: list[FusionChange] = []
    b_by_key = {f.key: f for f in fb}
    rest_a, used_b = [], set()
    for f in fa:
        g = b_by_key.get(f.key)
        if g is not None and g.key not in used_b:
            used_b.add(g.key)
            out.append(FusionChange(SAME if f.executor == g.executor else EXECUTOR, chain, graph_a, graph_b, [f], [g]))
        else:
            rest_a.append(f)
    rest_b = [g for g in fb if g.key not in used_b]
    # Group the rest by shared fused ops (union-find over fusions; nodes "a<i>" and "b<j>").
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    atom_owner: dict[tuple, str] = {}
    for i, f in enumerate(rest_a):
        find(f"a{i}")
        for at in f.atoms:
            atom_owner[at] = f"a{i}"
    for j, g in enumerate(rest_b):
        find(f"b{j}")
        for at in g.atoms:
            o = atom_owner.get(at)
            if o is not None:
                parent[find(o)] = find(f"b{j}")
    groups: dict[str, tuple[list, list]] = {}
    order: list[str] = []
    for side, (prefix, fusions) in enumerate((("a", rest_a), ("b", rest_b))):
        for i, f in enumerate(fusions):
            r = find(f"{prefix}{i}")
            if r not in groups:
                groups[r] = ([], [])
                order.append(r)
            groups[r][side].append(f)
    for r in order:
        ga, gb = groups[r]
        if not gb:
            kind = REMOVED
        elif not ga:
            kind = ADDED
        elif len(ga) == 1 and len(gb) == 1:
            kind = CHANGED
        elif len(ga) == 1:
            kind = SPLIT
        elif len(gb) == 1:
            kind = MERGED
        else:
            kind = REGROUPED
        out.append(FusionChange(kind, chain, graph_a, graph_b, ga, gb))
    return out


def compare_runs(a: RunSide, b: RunSide) -> RunComparison:
    """Return the comparison of runs ``a`` and ``b``: graphs matched by signature (then by shared
    source lines), fusions matched by identity, then grouped by shared fused ops."""
    notes = [f"{side.label}: {why}" for side in (a, b) for why in side.left_out]
    same_script = (a.script or "").rsplit("/", 1)[-1] == (b.script or "").rsplit("/", 1)[-1]
    if not same_script:
        notes.append(f"the recordings are of different scripts ({a.script} and {b.script}); compared anyway")
    pairs, only_a, only_b = match_graphs(a, b)
    ga_by_id = {g.id: g for g in a.graphs}
    gb_by_id = {g.id: g for g in b.graphs}
    changes: list[FusionChange] = []
    for ia, ib, _ in pairs:
        ga, gb = ga_by_id[ia], gb_by_id[ib]
        chains = [c for c in _COMPARED_CHAINS if (c in ga.finals or c in gb.finals)
                  and c not in ga.too_large | gb.too_large]
        for chain in chains:
            fa = fusions_of_trace(ga.finals[chain], ia, ga.timings) if chain in ga.finals else []
            fb = fusions_of_trace(gb.finals[chain], ib, gb.timings) if chain in gb.finals else []
            changes.extend(compare_fusions(fa, fb, chain, ia, ib))
    for ia in only_a:
        g = ga_by_id[ia]
        for chain in _COMPARED_CHAINS:
            if chain in g.finals:
                for f in fusions_of_trace(g.finals[chain], ia, g.timings):
                    changes.append(FusionChange(REMOVED, chain, ia, None, [f], []))
    for ib in only_b:
        g = gb_by_id[ib]
        for chain in _COMPARED_CHAINS:
            if chain in g.finals:
                for f in fusions_of_trace(g.finals[chain], ib, g.timings):
                    changes.append(FusionChange(ADDED, chain, None, ib, [], [f]))
    walls = [(ia, ib, chain, ga_by_id[ia].chain_walls[chain], gb_by_id[ib].chain_walls[chain])
             for ia, ib, _ in pairs for chain in _COMPARED_CHAINS
             if chain in ga_by_id[ia].chain_walls and chain in gb_by_id[ib].chain_walls]
    comp = RunComparison(a.label, b.label, same_script, pairs, only_a, only_b, changes, notes, walls,
                         compare_paths(changes, a.paths, b.paths))
    if not same_script or only_a or only_b:
        st = comp.match_stats()
        notes.append(f"matched {st['graphs_matched']} of {max(st['graphs_a'], st['graphs_b'])} graphs and "
                     f"{st['fused_ops_shared']} of {st['fused_ops_total']} fused ops "
                     f"({100 * st['fused_ops_shared_fraction']:.0f}%)")
    if a.executors != b.executors and a.executors is not None and b.executors is not None:
        notes.append(f"executors differ: {', '.join(a.executors)} vs {', '.join(b.executors)}")
    return comp


def run_side_from_recording(rec, label: Optional[str] = None) -> RunSide:
    """Return the :class:`RunSide` of an open recording (a ``thundervis.recording.Recording``):
    final trace per chain, graph signatures from the first acquired trace, kernel median times and
    each chain's median wall time per call."""
    run = rec.run()
    timings: dict[int, dict] = {}
    tm = rec.timings()
    for k in tm.kernels:
        if k.kind == "fusion":
            timings.setdefault(k.graph, {})[(k.chain, k.name)] = k.median_us
    walls: dict[int, dict] = {}
    for c in tm.chains:
        if c.wall_median_us is not None:
            walls.setdefault(c.graph, {})[c.chain] = c.wall_median_us
    from thundervis.recording import TooLarge
    graphs, left_out = [], []

    def trace_or_none(g: int, chain: str, index: int):
        try:
            return rec.pass_trace(g, chain, index)
        except TooLarge as e:  # only this chain is left out of the comparison, with its sentence
            left_out.append(f"graph {g} {chain} pass {index}: the trace is too large to show ({e.shown}); "
                            "not compared")
            return None
    for g in rec.graphs():
        finals: dict[str, Trace] = {}
        sig_trace, too_large = None, set()
        for c in g.chains:
            if not c.passes:
                continue
            if c.kind in _COMPARED_CHAINS:
                final = trace_or_none(g.id, c.kind, c.passes[-1].index)
                if final is not None:
                    finals[c.kind] = final
                else:
                    too_large.add(c.kind)
            if sig_trace is None or c.kind == "dynamo":
                if c.kind in ("dynamo",) + _COMPARED_CHAINS:
                    sig_trace = trace_or_none(g.id, c.kind, c.passes[0].index) or sig_trace
        sig, sources = graph_signature(sig_trace) if sig_trace is not None else (f"empty{g.id}", frozenset())
        graphs.append(GraphSide(g.id, sig, sources, finals, timings.get(g.id, {}), walls.get(g.id, {}),
                                frozenset(too_large)))
    return RunSide(label or rec.path, run.script or run.target, run.executors, graphs, fusion_paths(rec.events()),
                   tuple(dict.fromkeys(left_out)))
