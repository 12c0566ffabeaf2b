"""The view model's timing rows: per-kernel and per-chain timings of a profiled run, and stored
re-run results.

Part of the view model (:mod:`thundervis.recording.model`, which re-exports every name): frozen
values built by the reader, each with ``as_json()``.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class CallTimes:
    """Times over the profiled calls of one chain (microseconds): which chain, the ``clock``
    (``device`` | ``host``) on ``device``, how many calls and their median, min, max and total.
    What :class:`KernelTiming` and :class:`ChainTiming` start with."""

    graph: int
    chain: str
    clock: str
    device: str
    calls: int
    median_us: float
    min_us: float
    max_us: float
    total_us: float


@dataclass(frozen=True)
class KernelTiming(CallTimes):
    """Aggregated timing of one kernel (fusion) or torch-executor op of one chain (microseconds)."""

    uid: str
    name: str
    executor: str
    kind: str  # "fusion" | "op"
    position: int
    share: float
    bytes_read: int
    bytes_written: int
    gbps: float
    samples_us: tuple[float, ...] = ()
    starts_us: tuple[float, ...] = ()
    kernel_id: Optional[int] = None

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written (from the proxies' metadata)."""
        return self.bytes_read + self.bytes_written

    def as_json(self) -> dict:
        """Return the ``timing`` object of ``ls --json`` (see docs/recording.md)."""
        return {"calls": self.calls, "median_us": self.median_us, "min_us": self.min_us,
                "max_us": self.max_us, "total_us": self.total_us, "share": self.share,
                "bytes": self.bytes, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "gbps": self.gbps, "clock": self.clock}


@dataclass(frozen=True)
class ChainTiming(CallTimes):
    """Step time of one chain over its profiled calls (sum of its symbols' times per call), and the
    wall time of each untimed call after them (``walls_us``; empty when the run ended first or the
    recording is older than them)."""

    warmup: int = 0
    partial: bool = False
    call_starts_us: tuple[float, ...] = ()
    walls_us: tuple[float, ...] = ()

    @property
    def untimed_walls_us(self) -> tuple[float, ...]:
        """The recorded wall times that are times (a negative value, from a damaged file, is not)."""
        return tuple(w for w in self.walls_us if w >= 0)

    @property
    def wall_median_us(self) -> Optional[float]:
        """The median wall time of the untimed calls (µs), or None when none was recorded."""
        walls = self.untimed_walls_us
        return float(statistics.median(walls)) if walls else None

    def as_json(self) -> dict:
        """Return a JSON-able dict (every field, and ``wall_median_us``)."""
        return {"graph": self.graph, "chain": self.chain, "clock": self.clock, "device": self.device,
                "calls": self.calls, "median_us": self.median_us, "min_us": self.min_us,
                "max_us": self.max_us, "total_us": self.total_us, "warmup": self.warmup,
                "partial": self.partial, "call_starts_us": list(self.call_starts_us),
                "walls_us": list(self.walls_us), "wall_median_us": self.wall_median_us}


@dataclass(frozen=True)
class Timings:
    """Everything timed in a recording (empty when the run was not profiled)."""

    kernels: tuple[KernelTiming, ...] = ()
    chains: tuple[ChainTiming, ...] = ()

    def for_chain(self, graph: int, chain: str) -> list[KernelTiming]:
        """Return the timings of one chain in call order."""
        return sorted((k for k in self.kernels if k.graph == graph and k.chain == chain),
                      key=lambda k: k.position)

    def by_name(self, graph: int, name: str, chain: Optional[str] = None) -> Optional[KernelTiming]:
        """Return the timing of the kernel called ``name`` in ``graph`` (any chain unless
        ``chain``), or None."""
        for k in self.kernels:
            if k.graph == graph and k.name == name and (chain is None or k.chain == chain):
                return k
        return None

    def for_graph(self, graph: int) -> "Timings":
        """Return the timings of one graph."""
        return Timings(tuple(k for k in self.kernels if k.graph == graph),
                       tuple(c for c in self.chains if c.graph == graph))

    def as_json(self) -> dict:
        """Return the ``timings`` object of a graph in ``ls --json``: every timed kernel and torch
        op (call order within each chain) and each chain's step time (the sum of its timed symbols
        per call) with the wall time of its untimed calls (``walls_us``, ``wall_median_us``)."""
        return {
            "symbols": [{"chain": k.chain, "name": k.name, "uid": k.uid, "executor": k.executor,
                         "kind": k.kind, **k.as_json()} for k in self.kernels],
            "steps": [{"chain": c.chain, "clock": c.clock, "device": c.device, "calls": c.calls,
                       "median_us": c.median_us, "min_us": c.min_us, "max_us": c.max_us,
                       "total_us": c.total_us, "warmup": c.warmup, "partial": c.partial,
                       "walls_us": list(c.walls_us), "wall_median_us": c.wall_median_us}
                      for c in self.chains],
        }


@dataclass(frozen=True)
class RerunResult:
    """One re-run of one kernel with one executor. Times in microseconds; errors are against the
    float64 reference (``max_rel_error``: max |out - ref| / max |ref|)."""

    kernel: str
    executor: str
    device: str
    inputs: str  # "random" | "captured"
    iters: int
    status: str  # "ok" | "failed" | "unavailable"
    median_us: Optional[float] = None
    min_us: Optional[float] = None
    clock: str = "host"  # "device" on CUDA
    max_abs_error: Optional[float] = None
    max_rel_error: Optional[float] = None
    detail: str = ""
    kernel_id: Optional[int] = None

    def as_json(self) -> dict:
        """Return a JSON-able dict (every field)."""
        return {"kernel": self.kernel, "executor": self.executor, "device": self.device,
                "inputs": self.inputs, "iters": self.iters, "status": self.status,
                "median_us": self.median_us, "min_us": self.min_us, "clock": self.clock,
                "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                "detail": self.detail, "kernel_id": self.kernel_id}
