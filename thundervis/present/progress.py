"""Compile progress as views show it: which graph, chain and pass the compiler is at, and how many
kernels it built so far. ``thundervis run`` draws it as one live line on stderr while it compiles
(:mod:`thundervis.progress`); a viewer of a live recording reads the same from the recording
(:func:`recorded_progress`, e.g. polled with ``Recording.revision()``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# The passes of a forward/backward/inference chain with one fusion executor: acquire, decompose, cse,
# simplify, dce, claim, fuse, liveness, codegen.
DEFAULT_PASSES = 9
# Chains the acquire of a Dynamo graph records before AOTAutograd splits it; their one pass is all.
_ONE_PASS = ("dynamo", "joint")


@dataclass(frozen=True)
class CompileProgress:
    """Where compiling is: ``graph``, ``chain``, the pass just finished (``pass_index``, 0-based,
    of ``pass_total``; ``pass_name``) and ``kernels`` built so far in the run."""

    graph: int
    chain: str
    pass_index: int
    pass_total: int
    pass_name: str
    kernels: int

    def pass_text(self) -> str:
        """``pass 5/9 claim`` (the pass just finished, counted from 1)."""
        total = 1 if self.chain in _ONE_PASS else max(self.pass_total, self.pass_index + 1)
        return f"pass {self.pass_index + 1}/{total} {self.pass_name}"

    def text(self) -> str:
        """``compiling graph 0 · backward · pass 5/9 claim · 12 kernels built``."""
        return (f"compiling graph {self.graph} · {self.chain} · {self.pass_text()} · "
                f"{self.kernels} kernel{'s' if self.kernels != 1 else ''} built")

    def as_json(self) -> dict:
        """Return the progress as JSON values, with ``text``."""
        return {"graph": self.graph, "chain": self.chain, "pass_index": self.pass_index,
                "pass_total": self.pass_total, "pass_name": self.pass_name, "kernels": self.kernels,
                "text": self.text()}


def chain_progress(chain, pass_total: int = DEFAULT_PASSES) -> Optional[CompileProgress]:
    """Return the progress of one ``recording.model.Chain`` still compiling (None when it is not,
    or has no pass yet); ``kernels`` is not known per chain here (0)."""
    if chain.status != "compiling" or not chain.passes:
        return None
    p = chain.passes[-1]
    return CompileProgress(chain.graph, chain.kind, p.index, pass_total, p.name, 0)


def recorded_progress(overview, pass_total: int = DEFAULT_PASSES) -> Optional[CompileProgress]:
    """Return where the compile of a live recording is (``overview``: the reader's ``Overview``):
    the last recorded pass of a chain still ``compiling``, with the kernels recorded so far; None
    when no chain is compiling (the run is training, or done)."""
    kernels = sum(len(g.kernels) for g in overview.graphs)
    for g in reversed(overview.graphs):
        for c in reversed(g.chains):
            if c.status == "compiling" and c.passes:
                p = c.passes[-1]
                return CompileProgress(g.id, c.kind, p.index, pass_total, p.name, kernels)
    return None


def cpu_build_text(graph: int, chain: str, building: int, cores=None, threads=None) -> str:
    """``graph 0 · forward · 3 regions building for the CPU`` (Inductor compiles off the training
    thread while the regions run through torch); with no core spare beside the training's
    ``threads`` (of ``cores``), the builds take idle CPU time only and may not finish: it says so,
    ``… building for the CPU (idle time only)`` (the cores and threads are in the recording's
    ``why``; the line stays within 80 columns)."""
    text = f"graph {graph} · {chain} · {building} region{'s' if building != 1 else ''} building for the CPU"
    if isinstance(cores, int) and isinstance(threads, int) and 0 < cores <= threads:
        text += " (idle time only)"
    return text
