"""Numerics results in a recording: ``run --check-numerics`` (table ``kernel_numerics``, one row per
kernel) and ``run --compare-eager`` (table ``eager_comparisons``, one row per chain), written by the
writer's ``runtime`` events and read back as frozen values. Recordings written before these tables
existed read as empty ("not checked"). Every column is checked where it is read (:mod:`.typed`):
a value of the wrong type is one sentence in a ``RecordingError``; errors may be infinite (a kernel
that returned NaN where the reference is finite).
"""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass
from typing import Optional

from .errors import RecordingError
from .typed import describe, load_json, row_checker

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


_ROW_SELECT = ("SELECT kernel, calls, max_abs_error, max_rel_error, eager_abs_error, eager_rel_error, ratio,"
               " tolerance, verdict, detail FROM kernel_numerics WHERE graph_id=? AND chain=?")
_ROW_INSERT = ("INSERT OR REPLACE INTO kernel_numerics(graph_id, chain, kernel, uid, executor, calls,"
               " max_abs_error, max_rel_error, eager_abs_error, eager_rel_error, ratio, tolerance, verdict,"
               " detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _merged(graph: int, chain: str, data: dict, row: Optional[tuple]) -> tuple:
    """Return the ``kernel_numerics`` row (the values of ``_ROW_INSERT``) of one checked kernel
    call ``data`` merged into the kernel's stored ``row`` (``_ROW_SELECT``'s columns, None when
    there is none): errors are the worst seen, the verdict the worst by :data:`VERDICTS`."""
    kernel = str(data.get("kernel"))
    verdict = data.get("verdict") if data.get("verdict") in VERDICTS else "error"
    new = {"max_abs_error": _num(data.get("max_abs")), "max_rel_error": _num(data.get("max_rel")),
           "eager_abs_error": _num(data.get("eager_abs")), "eager_rel_error": _num(data.get("eager_rel")),
           "ratio": _num(data.get("ratio")), "tolerance": _num(data.get("tolerance"))}
    detail = _text(data.get("detail"))
    calls = 1
    if row is not None:
        calls = int(row[1] or 0) + 1
        for i, k in enumerate(new):
            new[k] = _worst(row[2 + i], new[k])
        if row[8] in VERDICTS and VERDICTS.index(row[8]) <= VERDICTS.index(verdict):
            verdict, detail = row[8], row[9] or detail
    return (graph, chain, kernel, data.get("uid") if isinstance(data.get("uid"), str) else None,
            _text(data.get("executor"), 40), calls, *new.values(), verdict, detail)


def store_kernel_numerics(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Merge one checked kernel call (``runtime(..., "numerics", data)``) into its row: errors are
    the worst seen, the verdict the worst by :data:`VERDICTS`. Runs in the caller's transaction."""
    store_kernel_numerics_rows(conn, graph, chain, [data])


def store_kernel_numerics_rows(conn: sqlite3.Connection, graph: int, chain: str, rows: list) -> None:
    """Merge the checked kernel calls of one chain call (``runtime(..., "numerics", [data, ...])``)
    as :func:`store_kernel_numerics` does each, in order (a kernel called twice merges twice);
    items that are not dicts are ignored. One read of the chain's rows and one batched write,
    not two statements per kernel: this runs inside every checked training step."""
    stored = {r[0]: r for r in conn.execute(_ROW_SELECT, (graph, chain))}
    merged: dict = {}
    for data in rows[:100_000]:
        if isinstance(data, dict):
            row = _merged(graph, chain, data, stored.get(str(data.get("kernel"))))
            merged[row[2]] = row
            stored[row[2]] = row[2:3] + row[5:]  # the _ROW_SELECT columns of the merged row
    conn.executemany(_ROW_INSERT, list(merged.values()))


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


_NUMERICS_COLUMNS = ("graph_id, chain, kernel, uid, executor, calls, max_abs_error, max_rel_error,"
                     " eager_abs_error, eager_rel_error, ratio, tolerance, verdict, detail")
_CHECK_NUMERICS = row_checker("kernel_numerics", _NUMERICS_COLUMNS.split(", "), (
    "int", "text", "text", "text?", "text?", "nat", "any", "any", "any", "any", "any", "any", "text", "text?"))
_EAGER_COLUMNS = "graph_id, chain, calls, max_abs_delta, max_rel_delta, outputs, detail"
_CHECK_EAGER = row_checker("eager_comparisons", _EAGER_COLUMNS.split(", "), (
    "int", "text", "nat", "any", "any", "text?", "text?"))


def read_kernel_numerics(store) -> list[KernelNumerics]:
    """Return every checked kernel of the recording ``store`` (see store.py), by graph, chain and
    kernel number, checked for type (empty: not checked, or a recording older than the table)."""
    if not store.has_table("kernel_numerics"):
        return []
    out = []
    for r in _CHECK_NUMERICS(store.rows(f"SELECT {_NUMERICS_COLUMNS} FROM kernel_numerics"), store.path):
        if r[12] not in VERDICTS:
            raise RecordingError(f"{store.path} is corrupted (kernel_numerics.verdict holds {describe(r[12])} "
                                 f"where one of {', '.join(VERDICTS)} belongs).")
        out.append(KernelNumerics(
            graph=r[0], chain=r[1], kernel=r[2], uid=r[3], executor=_text(r[4], 40), calls=r[5],
            max_abs_error=_num(r[6]), max_rel_error=_num(r[7]), eager_abs_error=_num(r[8]),
            eager_rel_error=_num(r[9]), ratio=_num(r[10]), tolerance=_num(r[11]), verdict=r[12],
            detail=_text(r[13])))
    return sorted(out, key=_kernel_order)


def _kernel_order(k: KernelNumerics) -> tuple:
    """graph, chain (forward before backward), then the kernel's number (fw_fusion_2 before _10)."""
    from .model import chain_position
    head, _, tail = k.kernel.rpartition("_")
    return (k.graph, chain_position(k.chain), k.chain, head,
            int(tail) if tail.isdigit() else -1, k.kernel)


def read_eager_comparisons(store) -> list[EagerComparison]:
    """Return every compared chain of the recording ``store``, checked for type (empty: the run
    did not compare with eager, or a recording older than the table)."""
    if not store.has_table("eager_comparisons"):
        return []
    out = []
    for r in _CHECK_EAGER(store.rows(f"SELECT {_EAGER_COLUMNS} FROM eager_comparisons"), store.path):
        outs = load_json(r[5], "eager_comparisons.outputs", store.path, expect=list, default=[])
        outs = tuple({"index": o.get("index") if isinstance(o.get("index"), int) else None,
                      "max_abs": _num(o.get("max_abs")), "max_rel": _num(o.get("max_rel"))}
                     for o in outs if isinstance(o, dict))
        out.append(EagerComparison(graph=r[0], chain=r[1], calls=r[2], max_abs_delta=_num(r[3]),
                                   max_rel_delta=_num(r[4]), outputs=outs, detail=_text(r[6])))
    from .model import chain_position
    return sorted(out, key=lambda c: (c.graph, chain_position(c.chain)))
