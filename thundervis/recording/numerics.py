"""Numerics results in a recording: ``run --check-numerics`` (table ``kernel_numerics``, one row per
kernel) and ``run --compare-eager`` (table ``eager_comparisons``, one row per chain), written by the
writer's ``runtime`` events and read back as frozen values. Recordings written before these tables
existed read as empty ("not checked"). Every column is validated where it is read: a value of the
wrong type reads as missing, never as a crash.
"""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass
from typing import Optional

# Worst first: the verdict a kernel keeps over several checked calls is the worst one seen.
VERDICTS = ("flagged", "error", "ok", "skipped")


@dataclass(frozen=True)
class KernelNumerics:
    """One kernel's ``--check-numerics`` result: its error and eager's against float64, the ratio,
    the tolerance it was held to and the verdict (``ok``, ``flagged``, ``skipped``, ``error``)."""

    graph: int
    chain: str
    kernel: str
    uid: Optional[str]
    executor: str
    calls: int
    max_abs_error: Optional[float]
    max_rel_error: Optional[float]
    eager_abs_error: Optional[float]
    eager_rel_error: Optional[float]
    ratio: Optional[float]
    tolerance: Optional[float]
    verdict: str
    detail: str

    @property
    def flagged(self) -> bool:
        """True when the kernel's error is beyond what eager float32 gets wrong."""
        return self.verdict == "flagged"

    def as_json(self) -> dict:
        """Return a JSON-able dict (non-finite numbers as strings)."""
        return {k: _json_number(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class EagerComparison:
    """One chain's ``--compare-eager`` result: the largest delta of its outputs (forward) or
    gradients (backward) from the eager ATen graph on the same inputs, over ``calls`` calls."""

    graph: int
    chain: str
    calls: int
    max_abs_delta: Optional[float]
    max_rel_delta: Optional[float]
    outputs: tuple
    detail: str

    def as_json(self) -> dict:
        """Return a JSON-able dict (non-finite numbers as strings)."""
        d = asdict(self)
        d["outputs"] = [{k: _json_number(v) for k, v in o.items()} for o in self.outputs]
        return {k: (_json_number(v) if k != "outputs" else v) for k, v in d.items()}


def _json_number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _num(v) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _text(v, limit: int = 500) -> str:
    return v[:limit] if isinstance(v, str) else ""


def _worst(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def store_kernel_numerics(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Merge one checked kernel call (``runtime(..., "numerics", data)``) into its row: errors are
    the worst seen, the verdict the worst by :data:`VERDICTS`. Runs in the caller's transaction."""
    kernel = str(data.get("kernel"))
    verdict = data.get("verdict") if data.get("verdict") in VERDICTS else "error"
    new = {"max_abs_error": _num(data.get("max_abs")), "max_rel_error": _num(data.get("max_rel")),
           "eager_abs_error": _num(data.get("eager_abs")), "eager_rel_error": _num(data.get("eager_rel")),
           "ratio": _num(data.get("ratio")), "tolerance": _num(data.get("tolerance"))}
    detail = _text(data.get("detail"))
    row = conn.execute("SELECT calls, max_abs_error, max_rel_error, eager_abs_error, eager_rel_error, ratio,"
                       " tolerance, verdict, detail FROM kernel_numerics WHERE graph_id=? AND chain=? AND kernel=?",
                       (graph, chain, kernel)).fetchone()
    calls = 1
    if row is not None:
        calls = int(row[0] or 0) + 1
        for i, k in enumerate(new):
            new[k] = _worst(row[1 + i], new[k])
        if row[7] in VERDICTS and VERDICTS.index(row[7]) <= VERDICTS.index(verdict):
            verdict, detail = row[7], row[8] or detail
    conn.execute("INSERT OR REPLACE INTO kernel_numerics(graph_id, chain, kernel, uid, executor, calls,"
                 " max_abs_error, max_rel_error, eager_abs_error, eager_rel_error, ratio, tolerance, verdict,"
                 " detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (graph, chain, kernel, data.get("uid") if isinstance(data.get("uid"), str) else None,
                  _text(data.get("executor"), 40), calls, *new.values(), verdict, detail))


def store_eager_comparison(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Merge one compared chain call (``runtime(..., "eager_compare", data)``) into its row."""
    outs = [o for o in data.get("outputs") or [] if isinstance(o, dict)][:10_000]
    row = conn.execute("SELECT calls, max_abs_delta, max_rel_delta, outputs, detail FROM eager_comparisons"
                       " WHERE graph_id=? AND chain=?", (graph, chain)).fetchone()
    max_abs, max_rel, calls, detail = _num(data.get("max_abs")), _num(data.get("max_rel")), 1, _text(data.get("detail"))
    if row is not None:
        calls = int(row[0] or 0) + 1
        max_abs, max_rel = _worst(row[1], max_abs), _worst(row[2], max_rel)
        detail = row[4] or detail
        try:
            old = json.loads(row[3] or "[]")
        except ValueError:
            old = []
        if isinstance(old, list) and len(old) == len(outs):
            outs = [{"index": o.get("index"), "max_abs": _worst(_num(p.get("max_abs")), _num(o.get("max_abs"))),
                     "max_rel": _worst(_num(p.get("max_rel")), _num(o.get("max_rel")))}
                    for p, o in zip(old, outs) if isinstance(p, dict)]
    conn.execute("INSERT OR REPLACE INTO eager_comparisons(graph_id, chain, calls, max_abs_delta, max_rel_delta,"
                 " outputs, detail) VALUES (?,?,?,?,?,?,?)",
                 (graph, chain, calls, max_abs, max_rel, json.dumps(outs, default=str), detail))


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


def read_kernel_numerics(conn: sqlite3.Connection) -> list[KernelNumerics]:
    """Return every checked kernel, by graph, chain and kernel name (empty: not checked)."""
    if not _has(conn, "kernel_numerics"):
        return []
    out = []
    for r in conn.execute("SELECT graph_id, chain, kernel, uid, executor, calls, max_abs_error, max_rel_error,"
                          " eager_abs_error, eager_rel_error, ratio, tolerance, verdict, detail"
                          " FROM kernel_numerics ORDER BY graph_id, chain, kernel"):
        if not isinstance(r[0], int) or not isinstance(r[1], str) or not isinstance(r[2], str):
            continue
        out.append(KernelNumerics(
            graph=r[0], chain=r[1], kernel=r[2], uid=r[3] if isinstance(r[3], str) else None,
            executor=_text(r[4], 40), calls=r[5] if isinstance(r[5], int) else 0,
            max_abs_error=_num(r[6]), max_rel_error=_num(r[7]), eager_abs_error=_num(r[8]),
            eager_rel_error=_num(r[9]), ratio=_num(r[10]), tolerance=_num(r[11]),
            verdict=r[12] if r[12] in VERDICTS else "error", detail=_text(r[13])))
    return sorted(out, key=_kernel_order)


def _kernel_order(k: KernelNumerics) -> tuple:
    """graph, chain (forward before backward), then the kernel's number (fw_fusion_2 before _10)."""
    from .model import CHAIN_ORDER
    head, _, tail = k.kernel.rpartition("_")
    return (k.graph, CHAIN_ORDER.index(k.chain) if k.chain in CHAIN_ORDER else 99, k.chain, head,
            int(tail) if tail.isdigit() else -1, k.kernel)


def read_eager_comparisons(conn: sqlite3.Connection) -> list[EagerComparison]:
    """Return every compared chain (empty: the run did not compare with eager)."""
    if not _has(conn, "eager_comparisons"):
        return []
    out = []
    for r in conn.execute("SELECT graph_id, chain, calls, max_abs_delta, max_rel_delta, outputs, detail"
                          " FROM eager_comparisons ORDER BY graph_id, chain"):
        if not isinstance(r[0], int) or not isinstance(r[1], str):
            continue
        try:
            outs = json.loads(r[5]) if isinstance(r[5], str) and len(r[5]) < 2**22 else []
        except (ValueError, RecursionError):
            outs = []
        outs = tuple({"index": o.get("index") if isinstance(o.get("index"), int) else None,
                      "max_abs": _num(o.get("max_abs")), "max_rel": _num(o.get("max_rel"))}
                     for o in (outs if isinstance(outs, list) else []) if isinstance(o, dict))
        out.append(EagerComparison(graph=r[0], chain=r[1], calls=r[2] if isinstance(r[2], int) else 0,
                                   max_abs_delta=_num(r[3]), max_rel_delta=_num(r[4]), outputs=outs,
                                   detail=_text(r[6])))
    from .model import CHAIN_ORDER
    return sorted(out, key=lambda c: (c.graph, CHAIN_ORDER.index(c.chain) if c.chain in CHAIN_ORDER else 99))
