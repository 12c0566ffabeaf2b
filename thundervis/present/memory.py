"""Every memory figure a view shows, computed once from the recorded ledger: the per-step totals
(saved bytes counted the way ``saved_tensors_hooks`` sees them, parameters, gradients, the static
peak and where it is), the saved tensors largest first, the same grouped by source line and by
module, each chain's timeline, and the bytes each remat policy keeps (the what-if)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from thundervis.recording.memory import MemoryLedger, read_memory

NOT_RECORDED = "not recorded in this recording (made by an older version)"


@dataclass(frozen=True)
class Group:
    """Saved bytes of one source line or module: its label, bytes and tensors."""

    label: str
    bytes: int
    tensors: int

    def as_json(self) -> dict:
        """Return the JSON form."""
        return {"label": self.label, "bytes": self.bytes, "tensors": self.tensors}


@dataclass(frozen=True)
class MemoryReport:
    """The memory view model of a recording (or of one graph). ``recorded`` is False for a
    recording made before the ledger; ``message`` then says so and every figure is 0/empty."""

    recorded: bool
    message: str
    policy: str
    saved_bytes: int
    saved_tensors: int
    parameters: int
    gradients: int
    peak_bytes: int
    peak_where: str
    what_if: dict            # {policy: bytes it saves}
    saved: tuple             # SavedTensor, largest counted storage first
    by_line: tuple           # Group
    by_module: tuple         # Group
    chains: dict             # {(graph, chain): {"peak": Peak, "timeline": [(position, uid, sym, bytes)]}}
    errors: tuple            # (graph, why there is no ledger)

    def as_json(self) -> dict:
        """Return the ``memory --json`` document."""
        return {
            "recorded": self.recorded, "message": self.message or None, "policy": self.policy,
            "saved_bytes": self.saved_bytes, "saved_tensors": self.saved_tensors, "parameters": self.parameters,
            "gradients": self.gradients, "peak_bytes": self.peak_bytes, "peak_where": self.peak_where,
            "what_if": dict(self.what_if),
            "saved": [saved_json(s) for s in self.saved],
            "by_line": [g.as_json() for g in self.by_line], "by_module": [g.as_json() for g in self.by_module],
            "chains": [{"graph": g, "chain": c, "peak_bytes": v["peak"].bytes if v["peak"] else 0,
                        "peak_where": where(v["peak"]) if v["peak"] else "",
                        "timeline": [b for _, _, _, b in v["timeline"]]} for (g, c), v in self.chains.items()],
            "errors": [{"graph": g, "error": e} for g, e in self.errors],
        }


def saved_json(s) -> dict:
    """Return the JSON form of one saved tensor (:class:`~thundervis.recording.memory.SavedTensor`)."""
    return {"graph": s.graph, "name": s.name, "shape": list(s.shape), "dtype": s.dtype, "bytes": s.bytes,
            "storage": s.storage, "storage_bytes": s.storage_bytes, "kind": s.kind, "counted": s.counted,
            "producer": s.producer, "op": s.op, "source": line_label(s.file, s.line), "code": s.code,
            "module": s.module, "readers": list(s.readers), "decision": "saved", "why": s.why}


def line_label(file: str, line: int) -> str:
    """Return ``file.py:LINE`` (base name), or ``(no source line)``."""
    return f"{os.path.basename(file)}:{line}" if file and line else "(no source line)"


def where(peak) -> str:
    """Return where a chain's peak is: ``graph 0 backward at bw_fusion_3 (model.py:42)``."""
    if peak is None:
        return ""
    return f"graph {peak.graph} {peak.chain} at {peak.sym} ({line_label(peak.file, peak.line)})"


def _empty(message: str) -> MemoryReport:
    return MemoryReport(False, message, "", 0, 0, 0, 0, 0, "", {}, (), (), (), {}, ())


def _groups(saved, key) -> tuple:
    acc: dict = {}
    for s in saved:
        if s.counted:
            b, n = acc.get(key(s), (0, 0))
            acc[key(s)] = (b + s.storage_bytes, n + 1)
    return tuple(Group(k, b, n) for k, (b, n) in sorted(acc.items(), key=lambda kv: (-kv[1][0], kv[0])))


def memory_report(rec, graph: Optional[int] = None, ledger: Optional[MemoryLedger] = None) -> MemoryReport:
    """Return the :class:`MemoryReport` of recording ``rec`` (a ``Recording``), of graph ``graph``
    only when given. Raises RecordingError for damaged ledger rows."""
    ledger = ledger if ledger is not None else read_memory(rec)
    if ledger is None:
        return _empty(NOT_RECORDED)
    keep = (lambda g: True) if graph is None else (lambda g: g == graph)
    graphs = [g for g in ledger.graphs if keep(g.graph)]
    if not graphs:
        return _empty(f"no memory ledger for graph {graph}" if graph is not None else
                      "no memory ledger: no graph of this run was compiled for training")
    ok = [g for g in graphs if g.error is None]
    saved = sorted((s for s in ledger.saved if keep(s.graph)),
                   key=lambda s: (not s.counted, -s.storage_bytes, s.graph, s.position))
    peaks = {(p.graph, p.chain): p for p in ledger.peaks if keep(p.graph)}
    chains = {(g, c): {"peak": peaks.get((g, c)), "timeline": rows}
              for (g, c), rows in sorted(ledger.timeline.items()) if keep(g)}
    top = max(ok, key=lambda g: g.peak_bytes, default=None)
    top_chain = max((p for p in peaks.values() if top is not None and p.graph == top.graph),
                    key=lambda p: p.bytes, default=None)
    policies = sorted({g.policy for g in ok})
    return MemoryReport(
        recorded=True, message="", policy="/".join(policies),
        saved_bytes=sum(g.saved_bytes for g in ok), saved_tensors=sum(g.saved_tensors for g in ok),
        parameters=sum(g.parameters for g in ok), gradients=sum(g.gradients for g in ok),
        peak_bytes=top.peak_bytes if top else 0, peak_where=where(top_chain),
        what_if={"off": sum(g.what_if_off for g in ok), "auto": sum(g.what_if_auto for g in ok)},
        saved=tuple(saved), by_line=_groups(saved, lambda s: f"{line_label(s.file, s.line)}  {s.code}".rstrip()),
        by_module=_groups(saved, lambda s: s.module or "(no module)"), chains=chains,
        errors=tuple((g.graph, g.error) for g in graphs if g.error is not None))


def chain_memory(rec, ledger: Optional[MemoryLedger] = None) -> dict:
    """Return {(graph, chain): {"saved_bytes", "saved" (:func:`saved_json` dicts), "peak_bytes"}} for ``ls --json``:
    a forward chain's saved values (counted like ``saved_tensors_hooks``), each chain's static peak;
    {} for a recording without the ledger."""
    ledger = ledger if ledger is not None else read_memory(rec)
    if ledger is None:
        return {}
    out: dict = {}
    for p in ledger.peaks:
        out[(p.graph, p.chain)] = {"saved_bytes": 0, "saved": [], "peak_bytes": p.bytes}
    for s in ledger.saved:
        d = out.setdefault((s.graph, "forward"), {"saved_bytes": 0, "saved": [], "peak_bytes": 0})
        d["saved"].append(saved_json(s))
        if s.counted:
            d["saved_bytes"] += s.storage_bytes
    return out


def step_memory(rec) -> tuple[Optional[int], dict]:
    """Return (the step's saved bytes, None when the recording has no ledger; :func:`chain_memory`)
    for ``ls --json``, reading the ledger once."""
    ledger = read_memory(rec)
    if ledger is None:
        return None, {}
    return memory_report(rec, ledger=ledger).saved_bytes, chain_memory(rec, ledger)


def policy_rows(report: MemoryReport, policy: Optional[str] = None) -> list[tuple[str, int, bool]]:
    """Return [(policy, bytes it saves, whether it ran)] for the what-if, ``policy`` alone when given."""
    return [(p, b, p in report.policy.split("/")) for p, b in report.what_if.items() if policy in (None, p)]


def timeline_points(report: MemoryReport) -> list[tuple[str, int]]:
    """Return the step's timeline as [(label, live bytes)]: each graph's forward then backward (what a
    plot of bytes over the step draws; the backward's saved inputs are live at its start)."""
    points = []
    for chain in ("forward", "backward"):
        for (g, c), v in report.chains.items():
            if c == chain:
                points += [(f"g{g} {c} {sym}", b) for _, _, sym, b in v["timeline"]]
    return points
