"""A recording's overview as views show it, read once: the reader's ``Overview`` (run, graphs,
chains, passes), every chain's :class:`~.status.ChainStatus`, the kernel table rows with their
run-time fallbacks, how many collectives ran between the compiled graphs, and the functions Dynamo
runs eagerly (no graph of theirs to show them in)."""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Optional

from .compile_times import compile_times
from .eager_regions import eager_regions
from .kernel_rows import KernelRow, kernel_table, runs_of
from .status import ChainStatus, chain_counts, chain_status, dynamo_fallbacks, graph_eager


@dataclass(frozen=True)
class ViewOverview:
    """What a view shows of a whole recording. ``overview``: the reader's ``Overview``;
    ``statuses``: one per chain; ``eager_graphs``: ``(graph id, why)`` for graphs that ran eagerly
    as a whole; ``kernels``: the kernel table."""

    overview: object
    statuses: tuple[ChainStatus, ...]
    eager_graphs: tuple[tuple[int, str], ...]
    kernels: tuple[KernelRow, ...]
    collectives_between: int = 0
    roofline_target: Optional[str] = None  # what the kernel rows' roofline µs are modelled on
    numerics: object = None  # present.numerics.NumericsSummary (run --check-numerics), or None
    # present.status.Fallback: functions Dynamo runs eagerly (recompile limit, could not trace them)
    dynamo_fallbacks: tuple = ()
    # present.compile_times.GraphCompileTime per graph: forward plus the lazily compiled backward
    compile_times: tuple = ()
    # present.eager_regions.EagerRegion: code Dynamo left to eager (graph breaks, untraced functions)
    eager_regions: tuple = ()
    # present.compiled_share.CompiledShare: how much ran compiled, by time and by ops
    compiled_share: object = None
    # present.abstract_fit.AbstractAnswer of an abstract run (fit and step per GPU), else None
    abstract: object = None

    # Fields of the reader's ``Overview`` that views read from here as well.
    path = property(attrgetter("overview.path"), doc="The recording's path (``str``).")
    run = property(attrgetter("overview.run"), doc="The recorded ``Run``.")
    graphs = property(attrgetter("overview.graphs"), doc="The recorded ``Graph`` objects (a tuple).")
    revision = property(attrgetter("overview.revision"), doc="The revision the overview was read at.")

    @property
    def run_status(self):
        """How the run ended, as views word it (``present.run_status.RunStatus``)."""
        from .run_status import run_status
        return run_status(self.run, len(self.graphs))

    def chain(self, graph: int, kind: str):
        """Return the ``Chain`` ``kind`` of graph ``graph`` (None when absent)."""
        for g in self.graphs:
            if g.id == graph:
                return next((c for c in g.chains if c.kind == kind), None)
        return None

    def status(self, graph: int, kind: str) -> Optional[ChainStatus]:
        """Return the status of chain ``kind`` of graph ``graph`` (None when absent)."""
        return next((s for s in self.statuses if s.graph == graph and s.chain == kind), None)

    def graph_eager(self, graph: int) -> Optional[str]:
        """Return why graph ``graph`` ran eagerly as a whole, or None."""
        return next((why for g, why in self.eager_graphs if g == graph), None)

    def compile_time(self, graph: int):
        """Return graph ``graph``'s ``present.compile_times.GraphCompileTime`` (None when absent)."""
        return next((t for t in self.compile_times if t.graph == graph), None)

    def eager_counts(self) -> tuple[int, int]:
        """Return (chains that ran eagerly, chains run), as ``ls`` counts them."""
        return chain_counts(self.graphs)

    def as_json(self) -> dict:
        """Return the reader's overview document plus ``statuses``, ``kernels`` (table rows),
        ``collectives_between`` and ``dynamo_fallbacks``."""
        return {**self.overview.as_json(), "statuses": [s.as_json() for s in self.statuses],
                "kernel_rows": [k.as_json() for k in self.kernels], "collectives_between": self.collectives_between,
                "dynamo_fallbacks": [f.as_json() for f in self.dynamo_fallbacks],
                "eager_regions": [r.as_json() for r in self.eager_regions],
                "compiled_share": self.compiled_share.as_json() if self.compiled_share is not None else None}


def read_overview(rec) -> ViewOverview:
    """Return the :class:`ViewOverview` of ``rec`` (an open ``Recording``): overview and events
    read once; raises what the reader raises. The kernel rows' roofline is left out (it reads the
    chains' final traces): :func:`with_roofline` adds it."""
    from thundervis.recording.collectives import count_between
    ov = rec.overview()
    events = rec.events()
    statuses = tuple(chain_status(g, c) for g in ov.graphs for c in g.chains)
    eager = tuple((g.id, why) for g in ov.graphs if (why := graph_eager(g)) is not None)
    kernels = kernel_table(rec, ov.graphs, events)
    regions = eager_regions(events)
    from .compiled_share import compiled_share
    from .numerics import numerics_summary
    return ViewOverview(ov, statuses, eager, kernels, count_between((e.event, e.data) for e in events),
                        numerics=numerics_summary(rec, runs_of(kernels)),
                        dynamo_fallbacks=tuple(dynamo_fallbacks(events)),
                        compile_times=tuple(compile_times(ov.graphs, events).values()),
                        eager_regions=regions, compiled_share=compiled_share(events, ov.graphs, regions),
                        abstract=_abstract(rec, ov, events))


def _abstract(rec, ov, events):
    """Return the abstract run's answer once the run has ended (it reads the final traces), else None."""
    if ov.run.status == "running" or not any(e.event == "abstract_run" for e in events):
        return None
    from .abstract_fit import abstract_answer
    return abstract_answer(rec)


def with_roofline(view: ViewOverview, roofline: dict, target: Optional[str]) -> ViewOverview:
    """Return ``view`` with each kernel row's roofline from ``roofline`` (``{kernel id:
    present.roofline.RooflineRow}``) and ``roofline_target`` set to ``target``."""
    from dataclasses import replace
    from .kernel_rows import with_roofline as row_with
    return replace(view, kernels=tuple(row_with(k, roofline.get(k.id)) for k in view.kernels),
                   roofline_target=target)
