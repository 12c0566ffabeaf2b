"""Per-kernel timings in a recording: writing the profiler's summaries, reading them back.

The compiler's profiler (``compiler/profiling.py``) reports one summary per chain through
``observer.runtime(graph, chain, "timings", data)``. :func:`store_timings` turns it into rows of the
``kernel_timings`` (one per symbol) and ``graph_timings`` (one per chain) tables, replacing earlier
rows of the same chain, so the file never grows with the length of a run. :func:`read_timings`
returns them as plain dataclasses; times are stored in ms and returned in microseconds.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Optional

# Our clock names ("device" / "host") and the ``method`` column the schema documents.
METHOD = {"device": "cuda-device", "host": "host"}
CLOCK = {v: k for k, v in METHOD.items()}


@dataclass(frozen=True)
class KernelTiming:
    """Aggregated timing of one kernel (fusion) or torch-executor op of one chain."""

    graph: int
    chain: str
    uid: str
    name: str
    executor: str
    kind: str  # "fusion" | "op"
    position: int
    clock: str  # "device" | "host"
    device: str
    calls: int
    median_us: float
    min_us: float
    max_us: float
    total_us: float
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
class ChainTiming:
    """Step time of one chain over its profiled calls (sum of its symbols' times per call)."""

    graph: int
    chain: str
    clock: str
    device: str
    calls: int
    median_us: float
    min_us: float
    max_us: float
    total_us: float
    warmup: int = 0
    partial: bool = False
    call_starts_us: tuple[float, ...] = ()

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        d = asdict(self)
        d["call_starts_us"] = list(self.call_starts_us)
        return d


@dataclass(frozen=True)
class Timings:
    """Everything timed in a recording."""

    kernels: tuple[KernelTiming, ...] = ()
    chains: tuple[ChainTiming, ...] = ()

    def for_chain(self, graph: int, chain: str) -> list[KernelTiming]:
        """Return the timings of one chain in call order."""
        return sorted((k for k in self.kernels if k.graph == graph and k.chain == chain),
                      key=lambda k: k.position)

    def by_name(self, graph: int, name: str) -> Optional[KernelTiming]:
        """Return the timing of the kernel called ``name`` in ``graph`` (any chain), or None."""
        for k in self.kernels:
            if k.graph == graph and k.name == name:
                return k
        return None


def _ms(us) -> float:
    return float(us) / 1e3


def store_timings(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Write one profiler summary (``runtime(..., "timings", data)``) into the timing tables,
    replacing the rows of the same chain, device and clock. Runs inside the caller's transaction."""
    clock = str(data.get("clock", "host"))
    method = METHOD.get(clock, clock)
    device = str(data.get("device", "cpu"))
    kernel_ids = {name: kid for kid, name in conn.execute(
        "SELECT id, name FROM kernels WHERE graph_id=? AND chain=?", (graph, chain))}
    conn.execute("DELETE FROM kernel_timings WHERE graph_id=? AND chain=? AND device=? AND method=?",
                 (graph, chain, device, method))
    rows = []
    for s in data.get("symbols", []):
        rows.append((graph, chain, str(s["uid"]), kernel_ids.get(s["name"]), device, method, int(s["calls"]),
                     _ms(s["median_us"]), _ms(s["min_us"]), _ms(s["max_us"]), _ms(s["total_us"]),
                     float(s["share"]), int(s["bytes_read"]), int(s["bytes_written"]), float(s["gbps"]),
                     str(s["name"]), str(s.get("executor", "")), str(s.get("kind", "op")), int(s["index"]),
                     json.dumps([_ms(v) for v in s.get("samples_us", [])]),
                     json.dumps([_ms(v) for v in s.get("starts_us", [])])))
    conn.executemany(
        "INSERT OR REPLACE INTO kernel_timings(graph_id, chain, uid, kernel_id, device, method, calls,"
        " median_ms, min_ms, max_ms, total_ms, share, bytes_read, bytes_written, gbps, name, executor,"
        " kind, position, samples, starts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    step = data.get("step", {})
    conn.execute(
        "INSERT OR REPLACE INTO graph_timings(graph_id, chain, device, method, calls, median_ms, min_ms,"
        " max_ms, total_ms, warmup, partial, call_starts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (graph, chain, device, method, int(data.get("calls", 0)), _ms(step.get("median_us", 0)),
         _ms(step.get("min_us", 0)), _ms(step.get("max_us", 0)), _ms(step.get("total_us", 0)),
         int(data.get("warmup", 0)), int(bool(data.get("partial"))),
         json.dumps([_ms(v) for v in data.get("call_starts_us", [])])))


def _floats(text) -> tuple[float, ...]:
    try:
        v = json.loads(text) if text else []
    except (TypeError, ValueError):
        return ()
    return tuple(float(x) * 1e3 for x in v if isinstance(x, (int, float)))


def read_timings(conn: sqlite3.Connection) -> Timings:
    """Return every timing in the recording open on ``conn`` (empty when nothing was profiled)."""
    kernels = []
    for r in conn.execute(
            "SELECT graph_id, chain, uid, name, executor, kind, position, method, device, calls, median_ms,"
            " min_ms, max_ms, total_ms, share, bytes_read, bytes_written, gbps, samples, starts, kernel_id"
            " FROM kernel_timings ORDER BY graph_id, chain, position"):
        kernels.append(KernelTiming(
            graph=r[0], chain=r[1], uid=r[2], name=r[3] or r[2], executor=r[4] or "", kind=r[5] or "op",
            position=r[6] if r[6] is not None else 0, clock=CLOCK.get(r[7], r[7]), device=r[8], calls=r[9],
            median_us=(r[10] or 0) * 1e3, min_us=(r[11] or 0) * 1e3, max_us=(r[12] or 0) * 1e3,
            total_us=(r[13] or 0) * 1e3, share=r[14] or 0.0, bytes_read=r[15] or 0, bytes_written=r[16] or 0,
            gbps=r[17] or 0.0, samples_us=_floats(r[18]), starts_us=_floats(r[19]), kernel_id=r[20]))
    chains = []
    for r in conn.execute(
            "SELECT graph_id, chain, method, device, calls, median_ms, min_ms, max_ms, total_ms, warmup,"
            " partial, call_starts FROM graph_timings ORDER BY graph_id, chain"):
        chains.append(ChainTiming(
            graph=r[0], chain=r[1], clock=CLOCK.get(r[2], r[2]), device=r[3], calls=r[4],
            median_us=(r[5] or 0) * 1e3, min_us=(r[6] or 0) * 1e3, max_us=(r[7] or 0) * 1e3,
            total_us=(r[8] or 0) * 1e3, warmup=r[9] or 0, partial=bool(r[10]), call_starts_us=_floats(r[11])))
    return Timings(tuple(kernels), tuple(chains))


def timings(path: str) -> Timings:
    """Return the timings of the recording at ``path`` (opened and validated by the recording
    reader; raises its ``RecordingError``)."""
    from thundervis.recording.reader import open_recording
    with open_recording(path, check=False) as rec:
        return rec.timings()


def fusion_timing_json(tm: Timings, graph: int, chain: str, name: str) -> Optional[dict]:
    """Return the ``timing`` object of one fusion for ``ls --json`` (None when not profiled)."""
    for k in tm.kernels:
        if k.graph == graph and k.chain == chain and k.name == name:
            return k.as_json()
    return None


def graph_timings_json(tm: Timings, graph: int) -> dict:
    """Return ``{"symbols": [...], "steps": [...]}`` for one graph in ``ls --json``: every timed
    kernel and torch op (call order within each chain) and each chain's step time."""
    return {
        "symbols": [{"chain": k.chain, "name": k.name, "uid": k.uid, "executor": k.executor, "kind": k.kind,
                     **k.as_json()} for k in tm.kernels if k.graph == graph],
        "steps": [{"chain": c.chain, "clock": c.clock, "device": c.device, "calls": c.calls,
                   "median_us": c.median_us, "min_us": c.min_us, "max_us": c.max_us, "total_us": c.total_us,
                   "warmup": c.warmup, "partial": c.partial} for c in tm.chains if c.graph == graph],
    }
