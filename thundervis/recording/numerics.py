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


def _worse(column: str) -> str:
    """SQL for the upsert below: ``column`` keeps the larger of its stored and new value (a NULL,
    not measured, gives way to a number)."""
    return (f"{column}=CASE WHEN excluded.{column} IS NULL THEN {column} WHEN {column} IS NULL"
            f" OR excluded.{column} > {column} THEN excluded.{column} ELSE {column} END")


def _rank(verdict: str) -> str:
    """SQL: the rank of a verdict column in :data:`VERDICTS` (NULL for any other text)."""
    return "(CASE " + verdict + "".join(f" WHEN '{v}' THEN {i}" for i, v in enumerate(VERDICTS)) + " END)"


_KEEPS_STORED = f"{_rank('verdict')} <= {_rank('excluded.verdict')}"
# One checked kernel call merged into its row, in SQL (no read back into Python): the errors the worst
# seen, the calls counted, the verdict the worst by VERDICTS with its detail (the new one's when the
# stored verdict is not one of them).
_ROW_UPSERT = (
    "INSERT INTO kernel_numerics(graph_id, chain, kernel, uid, executor, calls, max_abs_error, max_rel_error,"
    " eager_abs_error, eager_rel_error, ratio, tolerance, verdict, detail) VALUES (?,?,?,?,?,1,?,?,?,?,?,?,?,?)"
    " ON CONFLICT(graph_id, chain, kernel) DO UPDATE SET uid=excluded.uid, executor=excluded.executor,"
    " calls=calls+1, "
    + ", ".join(_worse(c) for c in ("max_abs_error", "max_rel_error", "eager_abs_error", "eager_rel_error",
                                    "ratio", "tolerance"))
    + f", detail=CASE WHEN {_KEEPS_STORED} THEN coalesce(nullif(detail, ''), excluded.detail)"
      " ELSE excluded.detail END"
    + f", verdict=CASE WHEN {_KEEPS_STORED} THEN verdict ELSE excluded.verdict END")


def _row_values(graph: int, chain: str, data: dict) -> tuple:
    """Return the values of :data:`_ROW_UPSERT` for one checked kernel call ``data`` (each field
    validated: a number or None, a bounded text, a known verdict or ``error``)."""
    get = data.get
    uid, verdict = get("uid"), get("verdict")
    return (graph, chain, str(get("kernel")), uid if isinstance(uid, str) else None, _text(get("executor"), 40),
            _num(get("max_abs")), _num(get("max_rel")), _num(get("eager_abs")), _num(get("eager_rel")),
            _num(get("ratio")), _num(get("tolerance")), verdict if verdict in VERDICTS else "error",
            _text(get("detail")))


def store_kernel_numerics(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Merge one checked kernel call (``runtime(..., "numerics", data)``) into its row: errors are
    the worst seen, the verdict the worst by :data:`VERDICTS`. Runs in the caller's transaction."""
    store_kernel_numerics_rows(conn, graph, chain, [data])


def store_kernel_numerics_rows(conn: sqlite3.Connection, graph: int, chain: str, rows: list) -> None:
    """Merge the checked kernel calls of one chain call (``runtime(..., "numerics", [data, ...])``)
    as :func:`store_kernel_numerics` does each, in order (a kernel called twice merges twice);
    items that are not dicts are ignored. One batched upsert that merges in SQL, no read back:
    this runs inside every checked training step."""
    conn.executemany(_ROW_UPSERT, [_row_values(graph, chain, d) for d in rows[:100_000] if isinstance(d, dict)])


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


@dataclass(frozen=True)
class KernelLabel:
    """What the numerics table shows of a recorded kernel: its id, graph, chain, name, executor
    and covered source lines (``file:line`` labels, sorted), without its members, tensors or
    timing (a group reads this for each of thousands of ranks)."""
    id: int
    graph: int
    chain: str
    name: str
    executor: str
    sources: tuple


_LABEL_COLUMNS = ("id", "graph_id", "chain", "name", "executor", "source_lines")
_CHECK_LABELS = row_checker("kernels", _LABEL_COLUMNS, ("int", "int", "text", "text", "text", "text"))


def read_kernel_labels(store) -> list[KernelLabel]:
    """Return a :class:`KernelLabel` for every kernel of the recording ``store``, in build order,
    checked for type; only ``source_lines`` is decoded."""
    from .model_runs import source_label
    out = []
    for r in _CHECK_LABELS(store.rows(f"SELECT {', '.join(_LABEL_COLUMNS)} FROM kernels ORDER BY id"), store.path):
        lines = load_json(r[5], "kernels.source_lines", store.path, list, [])
        out.append(KernelLabel(r[0], r[1], r[2], r[3], r[4], tuple(sorted(
            {source_label(s.get("file"), s.get("line")) for s in lines if isinstance(s, dict)}))))
    return out


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
