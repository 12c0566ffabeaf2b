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
    measured_bytes: Optional[int] = None   # the step's measured peak, counted like peak_bytes (None: not measured)
    measured_note: str = ""  # how far apart static and measured are, or why there is no measurement
    measured_method: str = ""

    def as_json(self) -> dict:
        """Return the ``memory --json`` document."""
        return {
            "recorded": self.recorded, "message": self.message or None, "policy": self.policy,
            "saved_bytes": self.saved_bytes, "saved_tensors": self.saved_tensors, "parameters": self.parameters,
            "gradients": self.gradients, "peak_bytes": self.peak_bytes, "peak_where": self.peak_where,
            "measured_peak_bytes": self.measured_bytes, "measured": self.measured_note or None,
            "measured_method": self.measured_method or None,
            "what_if": dict(self.what_if),
            "saved": [saved_json(s) for s in self.saved],
            "by_line": [g.as_json() for g in self.by_line], "by_module": [g.as_json() for g in self.by_module],
            "chains": [{"graph": g, "chain": c, "peak_bytes": v["peak"].bytes if v["peak"] else 0,
                        "peak_where": where(v["peak"]) if v["peak"] else "",
                        "measured_peak_bytes": v.get("measured"),
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


NOT_MEASURED_OLD = "not measured in this recording (made by an older version)"
NOT_MEASURED = "not measured (run with --profile to measure it)"
CLOSE = 0.10  # the target: static within 10% of measured


def apart(static: int, measured: int) -> str:
    """Return how far the static peak ``static`` is from the measured ``measured``, in words."""
    if measured <= 0:
        return "nothing measured"
    rel = (static - measured) / measured
    side = "above" if rel > 0 else "below"
    verdict = "within 10%" if abs(rel) <= CLOSE else "more than 10% apart (docs/memory.md says why)"
    return f"static {abs(rel) * 100:.1f}% {side} measured: {verdict}"


def _measured(ledger: MemoryLedger, keep, top, static: int) -> tuple:
    """Return ({(graph, chain): measured bytes}, the step's measured peak or None, its note, method)."""
    if ledger.measured is None:
        return {}, None, NOT_MEASURED_OLD, ""
    rows = [m for m in ledger.measured if keep(m.graph)]
    per_chain = {(m.graph, m.chain): m.bytes for m in rows}
    mine = [m for m in rows if top is not None and m.graph == top.graph]
    if not mine:
        return per_chain, None, NOT_MEASURED, ""
    # Counted like the static step peak: parameters + the larger chain peak.
    step = top.parameters + max(m.bytes for m in mine)
    return per_chain, step, apart(static, step), "/".join(sorted({m.method for m in mine}))


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
    per_chain, step, note, method = _measured(ledger, keep, top, top.peak_bytes if top else 0)
    for key, v in chains.items():
        v["measured"] = per_chain.get(key)
    return MemoryReport(
        recorded=True, message="", policy="/".join(policies),
        saved_bytes=sum(g.saved_bytes for g in ok), saved_tensors=sum(g.saved_tensors for g in ok),
        parameters=sum(g.parameters for g in ok), gradients=sum(g.gradients for g in ok),
        peak_bytes=top.peak_bytes if top else 0, peak_where=where(top_chain),
        what_if={"off": sum(g.what_if_off for g in ok), "auto": sum(g.what_if_auto for g in ok)},
        saved=tuple(saved), by_line=_groups(saved, lambda s: f"{line_label(s.file, s.line)}  {s.code}".rstrip()),
        by_module=_groups(saved, lambda s: s.module or "(no module)"), chains=chains,
        errors=tuple((g.graph, g.error) for g in graphs if g.error is not None),
        measured_bytes=step, measured_note=note, measured_method=method)


def chain_memory(rec, ledger: Optional[MemoryLedger] = None) -> dict:
    """Return {(graph, chain): {"saved_bytes", "saved" (:func:`saved_json` dicts), "peak_bytes", and
    "measured_peak_bytes" when measured}} for ``ls --json``:
    a forward chain's saved values (counted like ``saved_tensors_hooks``), each chain's static peak;
    {} for a recording without the ledger."""
    ledger = ledger if ledger is not None else read_memory(rec)
    if ledger is None:
        return {}
    out: dict = {}
    for p in ledger.peaks:
        out[(p.graph, p.chain)] = {"saved_bytes": 0, "saved": [], "peak_bytes": p.bytes}
    for m in ledger.measured or ():
        out.setdefault((m.graph, m.chain), {"saved_bytes": 0, "saved": [], "peak_bytes": 0})["measured_peak_bytes"] = m.bytes
    for s in ledger.saved:
        d = out.setdefault((s.graph, "forward"), {"saved_bytes": 0, "saved": [], "peak_bytes": 0})
        d["saved"].append(saved_json(s))
        if s.counted:
            d["saved_bytes"] += s.storage_bytes
    return out


def step_memory(rec) -> tuple[Optional[int], dict, Optional[dict]]:
    """Return (the step's saved bytes, None when the recording has no ledger; :func:`chain_memory`;
    the step's peaks {"static_bytes", "measured_bytes", "measured", "line"} or None) for ``ls``,
    reading the ledger once."""
    ledger = read_memory(rec)
    if ledger is None:
        return None, {}, None
    report = memory_report(rec, ledger=ledger)
    peak = None
    if report.recorded:
        peak = {"static_bytes": report.peak_bytes, "measured_bytes": report.measured_bytes,
                "measured": report.measured_note, "line": peak_line(report)}
    return report.saved_bytes, chain_memory(rec, ledger), peak


def peak_line(report: MemoryReport) -> str:
    """Return the step's peaks in one line: ``memory peak: static 12.3 MB, measured 12.9 MB (static
    4.6% below measured: within 10%)``, or the static one and why none was measured."""
    from thundervis.present.units import format_bytes
    static = f"memory peak: static {format_bytes(report.peak_bytes)}"
    if report.measured_bytes is None:
        return f"{static}; measured: {report.measured_note}"
    return f"{static}, measured {format_bytes(report.measured_bytes)} ({report.measured_note})"


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


def plot_series(report: MemoryReport) -> dict:
    """Return what a plot of the step's timeline draws: {"bytes": [live bytes per symbol, forward then
    backward], "split": index where the backward starts (None without one), "peak": index of the
    highest point, "peak_bytes", "title"}; {} for a report without a timeline. Labels are ours, never
    recorded strings."""
    points = timeline_points(report)
    if not points:
        return {}
    values = [b for _, b in points]
    split = next((i for i, (label, _) in enumerate(points) if " backward " in label), None)
    top = max(range(len(values)), key=values.__getitem__)
    return {"bytes": values, "split": split, "peak": top, "peak_bytes": values[top],
            "title": "live bytes over the step (static timeline)"}
