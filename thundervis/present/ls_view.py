"""The ``ls`` view of one recording: every fact ``thundervis ls`` prints and ``ls --json`` dumps, as
one frozen value built once by :func:`ls_view`.

It is the reader's ``Overview`` (run, graphs, chains, passes, kernels) with what present/ says of
it beside each part: the kernel table's cells per fusion, each chain's timed line and memory, each
graph's compile time, and for the run its status wording, fallbacks, eager regions, collectives,
roofline model, numerics, memory peak and an abstract run's answer. :meth:`LsView.as_json` is the
stable ``ls --json`` document (docs/recording.md); the text ``ls`` lays out the same value.
Recorded strings stay as recorded: the front end makes them terminal-safe or escapes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Optional

from .kernel_rows import KernelRow


def frozen(value: Any) -> Any:
    """Return ``value`` (JSON-like: dicts, lists, scalars) read-only: dicts as mapping proxies,
    lists as tuples, recursively."""
    # concrete types, not the Mapping ABC: its isinstance check dominates on large documents
    if isinstance(value, (dict, MappingProxyType)):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple([frozen(v) for v in value])
    return value


def plain(value: Any) -> Any:
    """Return the JSON-ready copy of a :func:`frozen` value (dicts and lists again)."""
    if isinstance(value, (dict, MappingProxyType)):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class LsFusion:
    """One fusion as ``ls`` shows it: the reader's ``KernelInfo``, its kernel table row
    (``present.kernel_rows``: what ran it, why it fell back, tag, label, sources cell), its
    ``targets`` (per GPU target: the ahead-of-time build and ``roofline_us``), its roofline model
    (bytes, FLOPs; None when not modelled), numerics verdict (None: not checked) and ``fold``, the
    repeated layers' kernels it is one of (``present.kernel_folds.fold_json_by_kernel``; None: alone)."""

    kernel: Any
    row: KernelRow
    targets: Mapping
    roofline: Optional[Mapping]
    numerics: Optional[str]
    fold: Optional[Mapping] = None

    def as_json(self, recorded: Optional[dict] = None) -> dict:
        """Return the ``graphs[].fusions[]`` item of ``ls --json`` (``recorded``: the kernel's own
        document when the graph's already holds it, else made here)."""
        row = self.row
        return {**(self.kernel.as_json() if recorded is None else recorded), "ran_in_torch": row.fallback,
                "ran_on": row.run.as_json() if row.run is not None else None,
                "tag": row.tag, "label": row.label, "sources_cell": row.sources_cell,
                "targets": plain(self.targets), "roofline": plain(self.roofline), "numerics": self.numerics,
                "fold": plain(self.fold)}


@dataclass(frozen=True)
class LsChain:
    """One chain as ``ls`` shows it: the reader's ``Chain``, its profiled time per call
    (``present.chain_times``; None: not profiled) and its memory (``present.memory``; None and
    () when the recording has no ledger)."""

    chain: Any
    timed: Optional[str]
    saved_bytes: Optional[int] = None
    saved: tuple = ()
    peak_bytes: Optional[int] = None
    measured_peak_bytes: Optional[int] = None

    def as_json(self, recorded: Optional[dict] = None) -> dict:
        """Return the ``graphs[].chains[]`` item of ``ls --json`` (``recorded``: the chain's own
        document when the graph's already holds it, else made here)."""
        return {**(self.chain.as_json() if recorded is None else recorded), "timed": self.timed, "saved_bytes": self.saved_bytes,
                "saved": plain(self.saved), "peak_bytes": self.peak_bytes,
                "measured_peak_bytes": self.measured_peak_bytes}


@dataclass(frozen=True)
class LsGraph:
    """One graph as ``ls`` shows it: the reader's ``Graph``, its compile time
    (``present.compile_times.GraphCompileTime``), its chains and its fusions."""

    graph: Any
    compile: Any
    chains: tuple[LsChain, ...]
    fusions: tuple[LsFusion, ...]

    def as_json(self) -> dict:
        """Return the ``graphs[]`` item of ``ls --json``."""
        d = self.graph.as_json()  # its chains and kernels in the reader's order: ours extend them
        d["chains"] = [c.as_json(doc) for c, doc in zip(self.chains, d["chains"], strict=True)]
        d["fusions"] = [k.as_json(doc) for k, doc in zip(self.fusions, d["fusions"], strict=True)]
        d["compile"] = self.compile.as_json()
        return d


@dataclass(frozen=True)
class LsCollectives:
    """The run's communication: ``in_traces`` (communication ops in the compiled traces), the
    counts of those run between graphs (``recording.collectives.CollectiveCounts``) and where they
    ran (``CollectivePlace``, with counts)."""

    in_traces: int
    counts: Any
    places: tuple

    def as_json(self) -> dict:
        """Return the ``collectives`` part of ``ls --json``."""
        return {"in_traces": self.in_traces, **self.counts.as_json(), "places": [p.as_json() for p in self.places]}


@dataclass(frozen=True)
class LsView:
    """Everything ``ls`` shows of one recording (see the module doc). ``overview``: the reader's
    ``Overview``; ``rank``: ``{rank, world_size, local_rank, node_rank}`` of one rank of a
    multi-process run (None otherwise); the other fields are present's values, named as the
    ``ls --json`` keys they become."""

    overview: Any
    graphs: tuple[LsGraph, ...]
    chains_eager: int
    chains_total: int
    run_status: Any
    compile_text: str
    compile_options_not_used: tuple[str, ...]
    fallbacks: tuple
    eager_regions: tuple
    eager_head: str
    collectives: LsCollectives
    compiled_share: Any  # present.compiled_share.CompiledShare: by time and by ops
    modelled_step: tuple
    roofline: tuple
    numerics: Any
    numerics_lines: tuple[str, ...]
    saved_bytes: Optional[int]
    memory_peak: Optional[Mapping]
    abstract: Any
    abstract_lines: tuple[str, ...]
    rank: Optional[Mapping] = None

    @property
    def run(self):
        """The recorded ``Run``."""
        return self.overview.run

    def as_json(self) -> dict:
        """Return the ``ls --json`` document (docs/recording.md): the reader's overview document
        with present's values beside each part."""
        d = self.overview.as_json()
        d["graphs"] = [g.as_json() for g in self.graphs]
        d.update({
            "chains_eager": self.chains_eager, "chains_total": self.chains_total,
            "run_status": self.run_status.as_json(), "compile_text": self.compile_text,
            "compile_options_not_used": list(self.compile_options_not_used),
            "fallbacks": [f.as_json() for f in self.fallbacks],
            "eager_regions": [r.as_json() for r in self.eager_regions], "eager_head": self.eager_head,
            "compiled_share": self.compiled_share.as_json(),
            "collectives": self.collectives.as_json(),
            "modelled_step": {s.target: s.as_json() for s in self.modelled_step},
            "roofline": [r.as_json() for r in self.roofline],
            "numerics": self.numerics.as_json(), "numerics_lines": list(self.numerics_lines),
            "saved_bytes": self.saved_bytes, "memory_peak": plain(self.memory_peak),
            "abstract": self.abstract.as_json() if self.abstract is not None else None,
            "abstract_lines": list(self.abstract_lines), "rank": plain(self.rank)})
        return d


def ls_view(rec, gpus=None) -> LsView:
    """Return the :class:`LsView` of ``rec`` (an open ``Recording``), the roofline model on the
    GPUs ``gpus`` names (default: the recorded targets, else sm_90); raises what the reader raises,
    and ``thundervis.gpus.UnknownGPU`` for a GPU name it does not know."""
    from .abstract_fit import abstract_answer
    from .collectives import collective_counts, collective_places, trace_communication_ops
    from .compile_times import run_compile_text
    from .eager_regions import eager_head
    from .numerics import ls_lines
    from .overview import read_overview
    from .roofline import chain_costs, roofline_rows, step_models
    from .status import compile_options_not_used, fallbacks
    # the overview every view reads (the TUI's and the widget's too): its compile times (forward +
    # the lazy backward, cache hits), eager regions and compiled share are read once, there
    view = read_overview(rec)
    times = {t.graph: t for t in view.compile_times}
    costs = chain_costs(rec)
    saved_bytes, memory, peak = _memory(rec)
    eager, total = view.eager_counts()
    regions = view.eager_regions
    # an abstract run's fit and step per GPU (None: a real run); the overview's when it has it
    answer = view.abstract if gpus is None and view.abstract is not None else abstract_answer(rec, gpus)
    return LsView(
        overview=view.overview, graphs=_graphs(rec, view, times, costs, memory, gpus),
        chains_eager=eager, chains_total=total, run_status=view.run_status,
        compile_text=run_compile_text(times),
        compile_options_not_used=tuple(compile_options_not_used(rec.events("compile_options_dropped"))),
        fallbacks=tuple(fallbacks(rec)), eager_regions=tuple(regions),
        eager_head=eager_head(eager, total, regions),
        compiled_share=view.compiled_share,
        collectives=LsCollectives(trace_communication_ops(rec), collective_counts(rec),
                                  tuple(collective_places(rec))),
        modelled_step=tuple(step_models(rec, gpus, costs)),
        roofline=tuple(roofline_rows(rec, (gpus or [None])[0], costs)),
        numerics=view.numerics, numerics_lines=tuple(ls_lines(view.numerics)),
        saved_bytes=saved_bytes, memory_peak=frozen(peak), abstract=answer,
        abstract_lines=tuple(answer.text_lines()) if answer is not None else (), rank=_rank(rec))


def _memory(rec) -> tuple:
    """Return ``present.memory.step_memory`` with each chain's part read-only."""
    from .memory import step_memory
    saved_bytes, per_chain, peak = step_memory(rec)
    return saved_bytes, {key: frozen(m) for key, m in per_chain.items()}, peak


def _rank(rec) -> Optional[Mapping]:
    """Return which rank of a multi-process run ``rec`` recorded (its last ``distributed`` event),
    or None for a run of one process."""
    found = [e.data for e in rec.events("distributed") if isinstance(e.data, dict)]
    if not found:
        return None
    return frozen({k: found[-1].get(k) for k in ("rank", "world_size", "local_rank", "node_rank")})


def _graphs(rec, view, times: dict, costs, memory: dict, gpus) -> tuple[LsGraph, ...]:
    """Return every graph's :class:`LsGraph`: chains with their timed line and memory, fusions
    with their kernel table row, targets, roofline and numerics verdict."""
    from .asm import target_summaries
    from .chain_times import chain_time_text
    from .roofline import fusion_model, fusion_targets
    from .kernel_folds import fold_json_by_kernel
    rows = {r.id: r for r in view.kernels}
    folds = fold_json_by_kernel(rec, [k for g in view.graphs for k in g.kernels], view.kernels)  # repeated layers
    built = target_summaries(rec)  # per GPU target compiled ahead of time (run --target)
    per_target, model = fusion_targets(rec, costs, gpus), fusion_model(costs)
    out = []
    for g in view.graphs:
        timed = {c.chain: c for c in g.timings.chains}
        chains = []
        for c in g.chains:
            m = memory.get((g.id, c.kind))
            chains.append(LsChain(c, chain_time_text(timed.get(c.kind)), *(
                (m["saved_bytes"], m["saved"], m["peak_bytes"], m.get("measured_peak_bytes")) if m else ())))
        fusions = []
        for k in g.kernels:
            targets = {t: dict(v) for t, v in built.get((g.id, k.chain, k.name), {}).items()}
            for target, values in per_target.get((g.id, k.chain, k.uid), {}).items():
                targets.setdefault(target, {}).update(values)
            verdict = view.numerics.verdict_of(g.id, k.chain, k.name)
            fusions.append(LsFusion(k, rows[k.id], frozen(targets), frozen(model.get((g.id, k.chain, k.uid))),
                                    None if verdict is None or verdict.verdict == "not checked" else verdict.verdict,
                                    frozen(folds.get(k.id))))
        out.append(LsGraph(g, times[g.id], tuple(chains), tuple(fusions)))
    return tuple(out)
