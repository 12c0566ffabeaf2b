"""A graph's compile time as the user waited for it: the forward plus the backward.

The recorded ``graphs.compile_s`` runs from Dynamo handing the graph over to the forward's callable
(acquire, joint, partition, the forward chain). AOTAutograd compiles the backward chain lazily, at
the first backward, so its time is not in it: the compiler reports every chain's own compile time as
a ``chain_compiled`` event (``{"seconds": s}``), and the backward's is added here. Every view shows
:attr:`GraphCompileTime.text` (or its parts from :meth:`GraphCompileTime.as_json`).

What came from the persistent compile cache is said here too, from the compiler's events: a
``compile_cache`` event per chain (its passes replayed), a ``partition_cache`` event per graph
(the remat partition's choice) and a ``compile_cache`` event with ``"level": "graph"`` (the graph
entry: the joint trace and every chain's acquire), each ``{"hit": bool, ...}``. A graph is ``from cache`` when every
one of them hit, ``partly from cache`` when some did; a recording without them (the cache off, or
older) says nothing about it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from thundervis.present.units import format_ms, plural

COMPILE_EVENTS = ("chain_compiled", "compile_cache", "partition_cache")  # what compile_times reads
_CACHE_EVENTS = {"compile_cache", "partition_cache"}
_PARTITION = "partition"  # the cache part of a graph that is not a chain: the remat partition's choice
_GRAPH = "graph"  # the graph entry: AOTAutograd's joint trace and every chain's acquire, skipped on a hit
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
    chain_s: tuple = ()  # (chain kind, seconds) per chain with a chain_compiled event
    cache: tuple = ()  # (chain kind or "partition", hit?) per compile cache event, in order

    @property
    def from_cache(self) -> Optional[str]:
        """``all`` (every cached part hit), ``some``, ``none``; None without cache events."""
        if not self.cache:
            return None
        hits = sum(1 for _, hit in self.cache if hit)
        return "all" if hits == len(self.cache) else "some" if hits else "none"

    @property
    def cache_text(self) -> str:
        """``from cache``, ``partly from cache (backward, partition)`` or ``""``."""
        state = self.from_cache
        if state == "all":
            return "from cache"
        if state == "some":
            return f"partly from cache ({', '.join(part for part, hit in self.cache if hit)})"
        return ""

    def chain_from_cache(self, kind: str) -> Optional[bool]:
        """Whether chain ``kind``'s passes were replayed from the cache (None: no event says)."""
        return next((hit for part, hit in self.cache if part == kind), None)

    def pass_from_cache(self, kind: str, name: str) -> bool:
        """Whether pass ``name`` of chain ``kind`` came from the cache: ``remat`` when the partition
        did, the pipeline's passes when the chain did; ``acquire`` (and the joint trace) when the
        whole graph came from its graph entry."""
        if kind == "joint" or (name == "acquire" and kind in ("forward", "backward", "inference")):  # graph entry
            return self.chain_from_cache(_GRAPH) is True
        if kind not in ("forward", "backward", "inference"):
            return False
        if name == "remat":
            return self.chain_from_cache(_PARTITION) is True
        return self.chain_from_cache(kind) is True

    def chain_text(self, kind: str) -> str:
        """``built in 0.21 s after the partition, from cache`` for chain ``kind`` (``""`` without its
        time). The chain's own time starts once AOTAutograd has partitioned the graph, so it is not
        the graph line's ``forward`` (which counts capture and partition too): the words say so."""
        s = next((s for k, s in self.chain_s if k == kind), None)
        if s is None:
            return ""
        return f"built in {format_ms(s * 1e3)} after the partition" + (", from cache" if self.chain_from_cache(kind) else "")

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
        words = self._text()
        return f"{words}, {self.cache_text}" if self.cache_text else words

    def _text(self) -> str:
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
        """Return ``{"total_ms", "forward_ms", "backward_ms", "backward", "text", "from_cache",
        "cache_text", "chains": {kind: {"ms", "from_cache", "text"}}}``."""
        ms = lambda s: None if s is None else s * 1e3  # noqa: E731
        kinds = [k for k, _ in self.chain_s] + [k for k, _ in self.cache if k != _PARTITION]
        chains = {k: {"ms": ms(next((s for c, s in self.chain_s if c == k), None)),
                      "from_cache": self.chain_from_cache(k), "text": self.chain_text(k)} for k in dict.fromkeys(kinds)}
        return {"total_ms": ms(self.total_s), "forward_ms": ms(self.forward_s),
                "backward_ms": ms(self.backward_s), "backward": self.backward, "text": self.text,
                "from_cache": self.from_cache, "cache_text": self.cache_text, "chains": chains}


def _seconds(data) -> Optional[float]:
    """Return the seconds of a recorded ``chain_compiled`` event; None for anything else (a
    recording is untrusted: a wrong type or a negative or infinite number is not a time)."""
    s = data.get("seconds") if isinstance(data, dict) else None
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
        return None
    return float(s)


def _hit(data) -> Optional[bool]:
    """Return a recorded cache event's ``hit`` (None unless it is a bool: recordings are untrusted)."""
    hit = data.get("hit") if isinstance(data, dict) else None
    return hit if isinstance(hit, bool) else None


def compile_times(graphs, events) -> dict[int, GraphCompileTime]:
    """Return each graph's :class:`GraphCompileTime` by graph id, from a recording's ``Graph``
    objects and its events (all of them, or those :data:`COMPILE_EVENTS` names)."""
    chain_s: dict[tuple, float] = {}
    cache: dict[int, dict] = {}
    for e in events:
        if e.graph is None:
            continue
        if e.event in _CACHE_EVENTS and (hit := _hit(e.data)) is not None:
            part = _PARTITION if e.event == "partition_cache" else _GRAPH if e.data.get("level") == "graph" else e.chain
            if isinstance(part, str):
                cache.setdefault(e.graph, {})[part] = hit  # a repeat (a replay that broke) is the later word
            continue
        s = _seconds(e.data) if e.event == "chain_compiled" else None
        if s is not None:
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
        own = tuple((c, s) for (gid, c), s in chain_s.items() if gid == g.id and isinstance(c, str))
        out[g.id] = GraphCompileTime(g.id, g.compile_s, seconds, state, own, tuple(cache.get(g.id, {}).items()))
    return out


def compile_events(rec) -> list:
    """Return the events of an open recording ``rec`` that :func:`compile_times` reads."""
    return [e for name in COMPILE_EVENTS for e in rec.events(name)]


def read_compile_times(rec) -> dict[int, GraphCompileTime]:
    """Return :func:`compile_times` of an open recording ``rec``."""
    return compile_times(rec.graphs(), compile_events(rec))


def run_cache_text(times: dict[int, GraphCompileTime]) -> str:
    """Return what of the run came from the compile cache: ``from cache`` (every graph),
    ``1 of 2 graphs from cache`` (some parts of some), or ``""`` (nothing, or no cache events)."""
    said = [t for t in times.values() if t.from_cache is not None]
    if not said or all(t.from_cache == "none" for t in said):
        return ""
    if all(t.from_cache == "all" for t in said):
        return "from cache"
    whole = sum(1 for t in said if t.from_cache == "all")
    return f"{whole} of {plural(len(said), 'graph')} from cache" + (" (others in part)" if any(
        t.from_cache == "some" for t in said) else "")


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
    cached = run_cache_text(times)
    tail = f", {cached}" if cached else ""
    if not any(t.backward == "compiled" for t in done):
        return f"compiled {n} in {format_ms(fw * 1e3)}{tail}"
    return (f"compiled {n} in {format_ms((fw + bw) * 1e3)} "
            f"(forward {format_ms(fw * 1e3)} + backward {format_ms(bw * 1e3)}){tail}")
