"""A graph's compile time as the user waited for it: the forward plus the backward.

The recorded ``graphs.compile_s`` runs from Dynamo handing the graph over to the forward's callable
(acquire, joint, partition, the forward chain). AOTAutograd compiles the backward chain lazily, at
the first backward, so its time is not in it: the compiler reports every chain's own compile time as
a ``chain_compiled`` event (``{"seconds": s}``), and the backward's is added here. Every view shows
:attr:`GraphCompileTime.text` (or its parts from :meth:`GraphCompileTime.as_json`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from thundervis.present.units import format_ms, plural

# What became of a graph's backward chain, as the views word it.
_NO_BACKWARD = "none"          # an inference graph, or a graph that failed as a whole
_NOT_RUN = "not compiled"      # a training graph whose backward never ran
_COMPILING = "compiling"       # being compiled now (or the run ended while it was)
_NOT_RECORDED = "not recorded"  # a recording older than the chain_compiled event


@dataclass(frozen=True)
class GraphCompileTime:
    """Graph ``graph``'s compile time: ``forward_s`` (the graph's own compile_s: None while it
    compiles), ``backward_s`` (the backward chain's; None unless ``backward`` is ``compiled``) and
    ``backward``: ``none``, ``not compiled``, ``compiling``, ``compiled`` or ``not recorded``."""

    graph: int
    forward_s: Optional[float]
    backward_s: Optional[float]
    backward: str

    @property
    def total_s(self) -> Optional[float]:
        """Forward plus backward in seconds (the forward alone without a backward time; None while
        the graph compiles)."""
        if self.forward_s is None:
            return None
        return self.forward_s + (self.backward_s or 0.0)

    @property
    def text(self) -> str:
        """``compiled in 26.4 s (forward 4.77 s + backward 21.6 s)``; ``compiled in 4.77 s`` for a
        graph with no backward; the forward with what became of the backward otherwise."""
        if self.forward_s is None:
            return "compiling"
        fw = format_ms(self.forward_s * 1e3)
        if self.backward == "compiled":
            return (f"compiled in {format_ms(self.total_s * 1e3)} "
                    f"(forward {fw} + backward {format_ms(self.backward_s * 1e3)})")
        if self.backward == _NO_BACKWARD:
            return f"compiled in {fw}"
        if self.backward == _COMPILING:
            return f"forward compiled in {fw}, backward compiling"
        if self.backward == _NOT_RUN:
            return f"compiled in {fw} (forward; the backward never ran)"
        return f"compiled in {fw} (forward; backward time not recorded)"

    def as_json(self) -> dict:
        """Return ``{"total_ms", "forward_ms", "backward_ms", "backward", "text"}``."""
        ms = lambda s: None if s is None else s * 1e3  # noqa: E731
        return {"total_ms": ms(self.total_s), "forward_ms": ms(self.forward_s),
                "backward_ms": ms(self.backward_s), "backward": self.backward, "text": self.text}


def _seconds(data) -> Optional[float]:
    """Return the seconds of a recorded ``chain_compiled`` event; None for anything else (a
    recording is untrusted: a wrong type or a negative or infinite number is not a time)."""
    s = data.get("seconds") if isinstance(data, dict) else None
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
        return None
    return float(s)


def compile_times(graphs, events) -> dict[int, GraphCompileTime]:
    """Return each graph's :class:`GraphCompileTime` by graph id, from a recording's ``Graph``
    objects and its events (all of them, or the ``chain_compiled`` ones)."""
    chain_s: dict[tuple, float] = {}
    for e in events:
        s = _seconds(e.data) if e.event == "chain_compiled" else None
        if s is not None and e.graph is not None:
            chain_s[(e.graph, e.chain)] = s  # a chain compiles once; a repeat is the later try
    out = {}
    for g in graphs:
        kinds = {c.kind: c for c in g.chains}
        back = kinds.get("backward")
        whole_failed = any(f.chain is None for f in g.failures)
        if back is None:
            state = _NOT_RUN if "forward" in kinds and not whole_failed else _NO_BACKWARD
            seconds = None
        elif (g.id, "backward") in chain_s:
            state, seconds = "compiled", chain_s[(g.id, "backward")]
        elif back.status == "compiling":
            state, seconds = _COMPILING, None
        else:
            state, seconds = _NOT_RECORDED, None
        out[g.id] = GraphCompileTime(g.id, g.compile_s, seconds, state)
    return out


def read_compile_times(rec) -> dict[int, GraphCompileTime]:
    """Return :func:`compile_times` of an open recording ``rec``."""
    return compile_times(rec.graphs(), rec.events("chain_compiled"))


def run_compile_s(times: dict[int, GraphCompileTime]) -> Optional[float]:
    """Return the seconds every graph took to compile, forward and backward (None when no graph
    finished compiling)."""
    done = [t.total_s for t in times.values() if t.total_s is not None]
    return sum(done) if done else None


def run_compile_text(times: dict[int, GraphCompileTime]) -> Optional[str]:
    """Return the run's compile time over every graph, ``compiled 2 graphs in 26.4 s (forward
    4.8 s + backward 21.6 s)``; None when no graph finished compiling."""
    done = [t for t in times.values() if t.forward_s is not None]
    if not done:
        return None
    fw = sum(t.forward_s for t in done)
    bw = sum(t.backward_s or 0.0 for t in done)
    n = plural(len(done), "graph")
    if not any(t.backward == "compiled" for t in done):
        return f"compiled {n} in {format_ms(fw * 1e3)}"
    return (f"compiled {n} in {format_ms((fw + bw) * 1e3)} "
            f"(forward {format_ms(fw * 1e3)} + backward {format_ms(bw * 1e3)})")
