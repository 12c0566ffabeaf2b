"""Timings and re-run results in a recording: the rows the profiler and ``rerun`` add, written and
read here (the only SQL outside the writer and the reader).

The compiler's profiler (``compiler/profiling.py``) reports one summary per chain through
``observer.runtime(graph, chain, "timings", data)``; :func:`store_timings` turns it into rows of the
``kernel_timings`` (one per symbol) and ``graph_timings`` (one per chain) tables, replacing earlier
rows of the same chain, so the file never grows with the length of a run; the wall times of the
untimed calls after the timed ones (``"walls"``) go to their chain's row (:func:`store_walls`). Times are stored in ms and
returned in microseconds. :func:`append_rerun_results` adds the results of ``thundervis rerun``.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from typing import Optional, Sequence
from urllib.parse import quote

from .errors import RecordingError
from .model import ChainTiming, KernelTiming, RerunResult, Timings
from .typed import load_json, row_checker

# Our clock names ("device" / "host") and the ``method`` column the schema documents.
METHOD = {"device": "cuda-device", "host": "host"}
CLOCK = {v: k for k, v in METHOD.items()}


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


def store_walls(conn: sqlite3.Connection, graph: int, chain: str, data: dict) -> None:
    """Write the wall times of a chain's untimed calls (``runtime(..., "walls", data)``) into the
    chain's ``graph_timings`` row of the same device and clock (none yet: nothing is written).
    Runs inside the caller's transaction."""
    clock = str(data.get("clock", "host"))
    walls = [_ms(v) for v in data.get("walls_us", []) if v.__class__ in (int, float) and math.isfinite(v)]
    conn.execute("UPDATE graph_timings SET call_walls=? WHERE graph_id=? AND chain=? AND device=? AND method=?",
                 (json.dumps(walls), graph, chain, str(data.get("device", "cpu")), METHOD.get(clock, clock)))


def _floats(text, what: str, where: str) -> tuple[float, ...]:
    v = load_json(text, what, where, list, [], depth=1)
    return tuple(float(x) * 1e3 for x in v if x.__class__ in (int, float) and math.isfinite(x))


_TIMING_COLUMNS = ("graph_id, chain, uid, name, executor, kind, position, method, device, calls, median_ms,"
                   " min_ms, max_ms, total_ms, share, bytes_read, bytes_written, gbps, samples, starts, kernel_id")
_CHECK_KERNEL_TIMINGS = row_checker("kernel_timings", _TIMING_COLUMNS.split(", "), (
    "int", "text", "text", "text?", "text?", "text?", "int?", "text", "text", "nat", "pos?", "pos?", "pos?", "pos?",
    "num?", "nat?", "nat?", "pos?", "text?", "text?", "int?"))
_CHAIN_TIMING_COLUMNS = ("graph_id, chain, method, device, calls, median_ms, min_ms, max_ms, total_ms, warmup,"
                         " partial, call_starts")
_CHECK_GRAPH_TIMINGS = row_checker("graph_timings", _CHAIN_TIMING_COLUMNS.split(", ") + ["call_walls"], (
    "int", "text", "text", "text", "nat", "pos?", "pos?", "pos?", "pos?", "nat?", "int?", "text?", "text?"))
_RERUN_COLUMNS = ("r.kernel_id, k.name, r.executor, r.device, r.inputs, r.iters, r.status, r.median_ms,"
                  " r.min_ms, r.max_abs_error, r.max_rel_error, r.detail")
_CHECK_RERUNS = row_checker("rerun_results", [c.split(".")[1] for c in _RERUN_COLUMNS.split(", ")], (
    "int?", "text?", "text", "text", "text", "nat?", "text", "pos?", "pos?", "num?", "num?", "text?"))


def _call_times(r, at: int) -> dict:
    """Return the ``CallTimes`` fields of a checked timing row: ``graph_id, chain`` first, then
    ``method, device, calls, median_ms, min_ms, max_ms, total_ms`` from column ``at`` on."""
    method, device, calls, median_ms, min_ms, max_ms, total_ms = r[at:at + 7]
    return {"graph": r[0], "chain": r[1], "clock": CLOCK.get(method, method), "device": device, "calls": calls,
            "median_us": (median_ms or 0) * 1e3, "min_us": (min_ms or 0) * 1e3, "max_us": (max_ms or 0) * 1e3,
            "total_us": (total_ms or 0) * 1e3}


def read_timings(store) -> Timings:
    """Return every timing in the recording ``store`` (a store: see store.py), checked for type and
    range (empty when nothing was profiled)."""
    where = store.path
    kernels = []
    for r in _CHECK_KERNEL_TIMINGS(store.rows(f"SELECT {_TIMING_COLUMNS} FROM kernel_timings"
                                              " ORDER BY graph_id, chain, position"), where):
        kernels.append(KernelTiming(
            **_call_times(r, 7), uid=r[2], name=r[3] or r[2], executor=r[4] or "", kind=r[5] or "op",
            position=r[6] if r[6] is not None else 0, share=r[14] or 0.0, bytes_read=r[15] or 0,
            bytes_written=r[16] or 0, gbps=r[17] or 0.0, samples_us=_floats(r[18], "kernel_timings.samples", where),
            starts_us=_floats(r[19], "kernel_timings.starts", where), kernel_id=r[20]))
    chains = []
    # Recordings written before call_walls existed lack the column: their chains have no wall times.
    walls = ", call_walls" if store.rows("SELECT 1 FROM pragma_table_info('graph_timings')"
                                         " WHERE name = 'call_walls'") else ", NULL"
    for r in _CHECK_GRAPH_TIMINGS(store.rows(f"SELECT {_CHAIN_TIMING_COLUMNS}{walls} FROM graph_timings"
                                             " ORDER BY graph_id, chain"), where):
        chains.append(ChainTiming(
            **_call_times(r, 2), warmup=r[9] or 0, partial=bool(r[10]),
            call_starts_us=_floats(r[11], "graph_timings.call_starts", where),
            walls_us=_floats(r[12], "graph_timings.call_walls", where)))
    return Timings(tuple(kernels), tuple(chains))


def read_rerun_results(store, kernel_id: Optional[int] = None) -> list[RerunResult]:
    """Return the stored re-run results of the recording ``store`` (of one kernel, or all), oldest
    first, checked for type and range."""
    where, params = ("WHERE r.kernel_id=?", (kernel_id,)) if kernel_id is not None else ("", ())
    out = []
    for row in _CHECK_RERUNS(store.rows(
            f"SELECT {_RERUN_COLUMNS} FROM rerun_results r"
            f" LEFT JOIN kernels k ON k.id = r.kernel_id {where} ORDER BY r.id", params), store.path):
        try:
            extra = load_json(row[11], "rerun_results.detail", store.path, dict, {}) if row[11] else {}
        except RecordingError:
            extra = {"detail": row[11]}
        out.append(RerunResult(kernel=row[1] or str(extra.get("kernel", "")), executor=row[2], device=row[3],
                               inputs=row[4], iters=row[5] or 0, status=row[6],
                               median_us=None if row[7] is None else row[7] * 1e3,
                               min_us=None if row[8] is None else row[8] * 1e3,
                               clock=str(extra.get("clock", "host")), max_abs_error=row[9],
                               max_rel_error=row[10], detail=str(extra.get("detail", "")), kernel_id=row[0]))
    return out


class ResultsNotStored(Exception):
    """The results could not be written into the recording; the message says why in a few words
    (read-only file or folder, a locked or damaged file)."""


def writable(path: str) -> bool:
    """Return True when this process may write the file at ``path`` and create files next to it
    (SQLite's journal)."""
    return os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)) or ".", os.W_OK)


def append_rerun_results(path: str, results: Sequence[RerunResult]) -> None:
    """Append ``results`` to the ``rerun_results`` table of the recording at ``path`` (open it with
    the reader first: this does not validate the file). A recording whose run has ended is left in
    rollback-journal mode, so readers leave no sidecar files. Raises :class:`ResultsNotStored`."""
    if not writable(path):
        raise ResultsNotStored("the file or its folder is read-only")
    from .rank_store import is_rank_file
    if is_rank_file(path):
        raise ResultsNotStored("a .tvrank of a packed group holds only its rank's run and times")
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True, timeout=10,
                               isolation_level=None)
    except sqlite3.Error as e:
        raise ResultsNotStored(f"SQLite: {e}") from None
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO rerun_results(kernel_id, executor, device, inputs, iters, status, median_ms, min_ms,"
            " max_abs_error, max_rel_error, detail, at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(r.kernel_id, r.executor, r.device, r.inputs, r.iters, r.status,
              None if r.median_us is None else r.median_us / 1e3,
              None if r.min_us is None else r.min_us / 1e3, r.max_abs_error, r.max_rel_error,
              json.dumps({"detail": r.detail, "clock": r.clock, "kernel": r.kernel}), time.time())
             for r in results])
        conn.execute("COMMIT")
        ended = conn.execute("SELECT status FROM run").fetchone()
        if ended and ended[0] != "running":
            try:  # no writer any more: a rollback journal leaves no -wal/-shm next to the file
                conn.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass
    except sqlite3.Error as e:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise ResultsNotStored(f"SQLite: {e}") from None
    finally:
        conn.close()
