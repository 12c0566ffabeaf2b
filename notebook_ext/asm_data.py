"""The widget's asm panel data: one compiled stage of one kernel for one GPU target, as JSON-ready
rows (from ``thundervis.present.asm``), and which kernels have builds.

The browser draws the rows with ``textContent`` (asm_view.js): recorded stage text is data, never
markup. A stage longer than :data:`MAX_ROWS` lines is cut there and says so.
"""
from __future__ import annotations

from typing import Optional

from thundervis.present.asm import STAGES, AsmUnavailable, asm_listing, build_text, kernel_targets
from thundervis.recording import RecordingError, UnknownItem
from thundervis.safe_text import visible_line

MAX_ROWS = 20000


class AsmError(ValueError):
    """The asked-for kernel, build or stage is not in the recording; one sentence."""


def build_targets(rec) -> dict:
    """Return {(graph, chain, kernel name): [targets]} of the kernels compiled ahead of time ({} for
    a run without ``--target`` or an unreadable builds table)."""
    out: dict = {}
    try:
        builds = rec.kernel_builds() if callable(getattr(rec, "kernel_builds", None)) else []
    except RecordingError:
        return {}
    for b in builds:
        out.setdefault((b.graph, b.chain, b.kernel), []).append(visible_line(b.target))
    return out


def asm_json(rec, graph: int, chain: str, kernel: str, target: Optional[str] = None, stage: str = "sass") -> dict:
    """Return the asm panel of ``kernel`` (graph, chain, name) on ``target`` (default: the first
    recorded) and ``stage``: ``targets``, ``stages``, the build's resources, the compiled Triton
    ``source`` lines, ``line_uids`` (Triton line -> symbol uid), ``members`` (uid -> op and source)
    and ``rows`` (``[text, triton line, uid, op, file:line]``). AsmError with one sentence otherwise."""
    try:
        k = rec.find_kernel(str(kernel), int(graph), str(chain))
        targets = kernel_targets(rec, k)
        listing = asm_listing(rec, k, target or None, str(stage))
    except (AsmUnavailable, UnknownItem) as e:
        raise AsmError(str(e).rstrip(".") + ".") from None
    b = listing.build
    rows = listing.rows[:MAX_ROWS]
    members = {}
    for uid, m in b.members.items():
        sym = m.get("sym") if isinstance(m.get("sym"), str) else None
        members[uid] = {"sym": sym, "where": next((r.where for r in listing.rows if r.uid == uid and r.where), None)}
    return {"kernel": listing.kernel, "graph": int(graph), "chain": str(chain), "target": listing.target,
            "targets": targets, "stage": listing.stage, "stages": list(STAGES),
            "build": {"registers": b.registers, "spills": b.spills, "shared_bytes": b.shared_bytes,
                      "occupancy": b.occupancy, "summary_text": build_text(b)},
            "source": list(listing.triton_source), "line_uids": {str(n): u for n, u in b.line_uids.items()},
            "members": members, "rows": [[r.text, r.triton_line, r.uid, r.sym, r.where] for r in rows],
            "truncated": max(0, len(listing.rows) - MAX_ROWS)}
