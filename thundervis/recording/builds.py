"""Kernels compiled ahead of time for GPU targets: storing them (the writer) and reading them
(the reader), one owner for the SQL of tables ``kernel_builds`` and ``kernel_build_stages``.

A build row is one kernel for one target (``sm_90``): status, error, resources and a JSON summary;
the compiled stages of a distinct build (identical kernels share one) are stored once, as
zlib-compressed JSON. Every value read is validated (type, range, size); a damaged row is a
``RecordingError``. Stage text is data: views show it with control characters made visible and
never execute it. Recordings without the tables have no builds.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, field
from typing import Optional

from .errors import RecordingError
from .typed import decompress, load_json, row_checker

STATUSES = ("ok", "failed", "unplanned", "unfinished")
STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")
MAX_STAGES_BYTES = 256 * 2**20  # decompressed size of one build's stages


@dataclass(frozen=True)
class KernelBuild:
    """One kernel compiled for one GPU target. ``spills`` counts local memory per thread in 4-byte
    words (what Triton reports as ``n_spills`` for a loaded kernel); ``occupancy`` is theoretical
    (0..1) from registers, shared memory and warps for the target's per-SM limits; ``plan`` says how
    the kernel is launched (plan kind, grid, functions); ``mix`` is the SASS instruction mix;
    ``line_uids`` maps lines of the compiled Triton source to member symbol uids and ``members``
    gives each member's op and user source line."""

    graph: int
    chain: str
    kernel: str
    target: str
    status: str
    error: Optional[str]
    seconds: Optional[float]
    registers: Optional[int]
    spills: Optional[int]
    shared_bytes: Optional[int]
    local_bytes: Optional[int]
    occupancy: Optional[float]
    build_key: Optional[str]
    plan: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)
    occupancy_detail: dict = field(default_factory=dict)
    mix: dict = field(default_factory=dict)
    functions: tuple = ()
    line_uids: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        """Return every field as a JSON-able dict, in field order (``functions`` a list,
        ``line_uids`` keyed by line number text)."""
        return {**asdict(self), "functions": list(self.functions),
                "line_uids": {str(k): v for k, v in self.line_uids.items()}}


@dataclass(frozen=True)
class BuildStages:
    """The compiled stages of one build: the Triton ``source`` compiled, ``stages`` {stage: text}
    and ``lines`` {stage: Triton source line per stage line, 0 for none}."""

    source: str
    stages: dict
    lines: dict

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"source": self.source, "stages": dict(self.stages), "lines": {k: list(v) for k, v in self.lines.items()}}


# ------------------------------------------------------------------------------ writing

def _int(v) -> Optional[int]:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def store_build(conn, graph: int, chain: str, kernel: str, target: str, build: dict) -> None:
    """Insert one build (the dict ``compiler.aot.pool`` reports) and, once per build key and
    target, its compressed stages; within the writer's transaction ``conn``."""
    res = build.get("resources") or {}
    occ = build.get("occupancy") or {}
    summary = {k: build.get(k) for k in ("plan", "resources", "occupancy", "mix", "functions", "line_uids",
                                         "members", "triton") if build.get(k) is not None}
    conn.execute("INSERT OR REPLACE INTO kernel_builds(graph_id, chain, kernel, target, build_key, status, error,"
                 " seconds, registers, spills, shared_bytes, local_bytes, occupancy, summary)"
                 " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (graph, chain, kernel, target, build.get("build_key"), build.get("status", "failed"),
                  build.get("error"), build.get("seconds"), _int(res.get("registers")), _int(res.get("spills")),
                  _int(res.get("shared_bytes")), _int(res.get("local_bytes")), occ.get("occupancy"),
                  json.dumps(summary, default=str)))
    if build.get("stages") and build.get("build_key"):
        blob = zlib.compress(json.dumps({"source": build.get("source") or "", "stages": build["stages"],
                                         "lines": build.get("lines") or {}}).encode(), 6)
        conn.execute("INSERT OR IGNORE INTO kernel_build_stages(build_key, target, stages) VALUES (?,?,?)",
                     (build["build_key"], target, blob))


# ------------------------------------------------------------------------------ reading

_COLUMNS = ("graph_id, chain, kernel, target, status, error, seconds, registers, spills, shared_bytes,"
            " local_bytes, occupancy, build_key, summary")
_CHECK = row_checker("kernel_builds", _COLUMNS.split(", "), (
    "int", "text", "text", "text", "text", "text?", "pos?", "nat?", "nat?", "nat?", "nat?", "pos?", "text?", "text"))


def read_builds(rec, graph: Optional[int] = None, chain: Optional[str] = None,
                kernel: Optional[str] = None) -> list[KernelBuild]:
    """Return the builds recorded in ``rec`` (a ``Recording``), optionally of one graph, chain and
    kernel name, ordered by graph, chain, kernel and target."""
    if not rec.store.has_table("kernel_builds"):
        return []
    where, params = [], []
    for col, v in (("graph_id", graph), ("chain", chain), ("kernel", kernel)):
        if v is not None:
            where.append(f"{col}=?")
            params.append(v)
    sql = f"SELECT {_COLUMNS} FROM kernel_builds" + (" WHERE " + " AND ".join(where) if where else "")
    rows = _CHECK(rec.store.rows(sql + " ORDER BY graph_id, chain, kernel, target", tuple(params)), rec.path)
    return [_build(rec, r) for r in rows]


def _bad(rec, what: str) -> RecordingError:
    return RecordingError(f"{rec.path} is corrupted (a kernel build has a bad {what}).")


def _build(rec, r: tuple) -> KernelBuild:
    g, chain, kernel, target, status, error, seconds, regs, spills, shared, local, occ, key, summary = r
    if not isinstance(g, int) or not all(isinstance(x, str) for x in (chain, kernel, target)):
        raise _bad(rec, "name")
    if status not in STATUSES:
        raise _bad(rec, "status")
    for v in (regs, spills, shared, local):
        if v is not None and (not isinstance(v, int) or v < 0 or v > 2**40):
            raise _bad(rec, "resource count")
    if occ is not None and (not isinstance(occ, (int, float)) or not 0 <= occ <= 1):
        raise _bad(rec, "occupancy")
    if seconds is not None and not isinstance(seconds, (int, float)):
        raise _bad(rec, "time")
    if error is not None and not isinstance(error, str) or key is not None and not isinstance(key, str):
        raise _bad(rec, "text")
    s = load_json(summary, "a kernel build summary", rec.path, dict, {})
    line_uids = {}
    for k, v in (s.get("line_uids") or {}).items() if isinstance(s.get("line_uids"), dict) else ():
        if str(k).isdigit() and isinstance(v, str):
            line_uids[int(k)] = v
    members = {u: m for u, m in (s.get("members") or {}).items() if isinstance(m, dict)} \
        if isinstance(s.get("members"), dict) else {}

    def d(name):
        v = s.get(name)
        return v if isinstance(v, dict) else {}
    functions = tuple(f for f in s.get("functions") or () if isinstance(f, dict)) \
        if isinstance(s.get("functions"), list) else ()
    return KernelBuild(g, chain, kernel, target, status, error, seconds, regs, spills, shared, local, occ, key,
                       d("plan"), d("resources"), d("occupancy"), d("mix"), functions, line_uids, members)


def read_stages(rec, build: KernelBuild) -> Optional[BuildStages]:
    """Return the stages of ``build`` (None when it has none: a failed or unfinished build)."""
    if build.build_key is None or not rec.store.has_table("kernel_build_stages"):
        return None
    rows = rec.store.rows("SELECT stages FROM kernel_build_stages WHERE build_key=? AND target=?",
                          (build.build_key, build.target))
    if not rows:
        return None
    raw = decompress(rows[0][0], "the stages of a kernel build", rec.path, MAX_STAGES_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(rec, "stage blob") from None
    value = load_json(text, "the stages of a kernel build", rec.path, dict, {})
    if not isinstance(value.get("stages"), dict):
        raise _bad(rec, "stage blob")
    stages = {k: v for k, v in value["stages"].items() if k in STAGES and isinstance(v, str)}
    lines = {}
    for k, v in (value.get("lines") or {}).items():
        if k in stages and isinstance(v, list) and all(isinstance(n, int) and n >= 0 for n in v):
            lines[k] = v
    source = value.get("source") if isinstance(value.get("source"), str) else ""
    return BuildStages(source, stages, lines)
