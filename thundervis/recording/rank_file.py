"""Rank files of a packed group: what is particular to one rank, on top of its variant's recording.

After :func:`~.group_store.pack_group`, ranks that compiled the same graphs into the same traces
(one *variant*, see :func:`variant_fingerprint`) keep one packed recording between them: the first
such rank's ``rank-NNNNN.tvrec``. Every other rank of the variant becomes ``rank-NNNNN.tvrank``: a
small zlib-compressed JSON document (magic line ``TVRANK1``) holding what differs between ranks —
its run row (status, exit code, traceback, pid, host, times), its events (the ``distributed``
event: rank, world size ...), each pass's duration, time and ``seq_nr`` offset, each graph's compile
time, its kernel and chain timings and re-run results — and the name and fingerprint of the variant
recording it stands on.

:func:`open_rank_file` opens the variant recording read-only and lays the rank's part over it on
each SQLite connection (temporary tables named like the recording's, which SQLite resolves first,
and temporary views joining the per-pass and per-graph times), so the reader API and every view
read a ``.tvrank`` exactly as a recording. Sent alone, a rank file says in one sentence which files
of its group folder it needs. Nothing in it is executed; its JSON is checked field by field.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zlib
from typing import Optional

from .reader import Recording, RecordingError, _connect, open_recording

MAGIC = b"TVRANK1\n"
FORMAT = "thundervis-rank"
_MAX_BYTES = 64 << 20

RUN_COLUMNS = ("id", "script", "module", "argv", "cwd", "python", "torch", "triton", "thundervis", "device",
               "executors", "started_at", "ended_at", "status", "exit_code", "traceback", "pid", "host",
               "process_start")
OWN_TABLES = ("events", "kernel_timings", "graph_timings", "rerun_results")


def is_rank_file(path: str) -> bool:
    """Return True when ``path`` starts like a ``.tvrank`` file."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def variant_fingerprint(conn: sqlite3.Connection) -> str:
    """Return the fingerprint of what a packed recording shares with ranks that compiled the same
    traces: graphs (what was compiled), chains, passes (names, trace references without the
    ``seq_nr`` offset), kernels, failures, recorded sources. Times, the run and events are left out."""
    from .group_store import _ref_fp
    h = hashlib.sha256()

    def feed(sql):
        for row in conn.execute(sql):
            h.update(repr(row).encode())
        h.update(b"|")
    feed("SELECT id, compile_id, reason, recompile_reason, graph_break_reason, n_inputs, n_nodes FROM graphs ORDER BY id")
    feed("SELECT graph_id, kind, status, error FROM chains ORDER BY graph_id, kind")
    for row in conn.execute("SELECT graph_id, chain, idx, name, changed, n_symbols, symbols_from, trace_json, printed"
                            " FROM passes ORDER BY graph_id, chain, idx"):
        h.update(repr(row[:7] + (_ref_fp(row[7]) or row[7], row[8])).encode())
    h.update(b"|")
    feed("SELECT id, graph_id, chain, name, executor, uid, pass_name, language, code, members, ops, inputs,"
         " outputs, source_lines, note, trace_json FROM kernels ORDER BY id")
    feed("SELECT graph_id, chain, error FROM failures ORDER BY id")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='sources'").fetchone():
        feed("SELECT file, text, size, sha256 FROM sources ORDER BY file")
    return h.hexdigest()


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list, list]:
    cur = conn.execute(f"SELECT * FROM {table}")
    return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]


def _meta_delta(meta: Optional[str], base: Optional[str]) -> Optional[dict]:
    """Return the keys of a pass's meta that differ from the variant's (None: none differ)."""
    try:
        mine, theirs = json.loads(meta or "{}"), json.loads(base or "{}")
    except ValueError:
        return None
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    delta = {k: v for k, v in mine.items() if theirs.get(k) != v}
    return delta or None


def write_rank_file(conn: sqlite3.Connection, variant: sqlite3.Connection, out_path: str, variant_name: str,
                    variant_fp: str) -> None:
    """Write the ``.tvrank`` of the packed recording open on ``conn`` (its rank-specific rows)
    standing on the recording open on ``variant`` (``variant_name`` in the same folder, fingerprint
    ``variant_fp``): a pass's meta keeps only what differs from the variant's."""
    run_cols, run_rows = _rows(conn, "run")
    base = {(g, c, i): m for g, c, i, m in variant.execute("SELECT graph_id, chain, idx, meta FROM passes")}
    doc = {"format": FORMAT, "version": 1, "variant": variant_name, "variant_fingerprint": variant_fp,
           "run": dict(zip(run_cols, run_rows[0])),
           "passes": [[g, c, i, ms, at, tj, _meta_delta(meta, base.get((g, c, i)))] for g, c, i, ms, at, tj, meta
                      in conn.execute("SELECT graph_id, chain, idx, duration_ms, recorded_at, trace_json, meta"
                                      " FROM passes ORDER BY graph_id, chain, idx")],
           "graphs": [list(r) for r in conn.execute("SELECT id, started_at, compile_s FROM graphs ORDER BY id")],
           "tables": {t: dict(zip(("columns", "rows"), _rows(conn, t))) for t in OWN_TABLES}}
    data = MAGIC + zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)
    tmp = f"{out_path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out_path)


def read_rank_file(path: str) -> dict:
    """Return the checked document of a ``.tvrank`` file; RecordingError (one sentence) if damaged."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            raise RecordingError(f"{path} is too large for a rank file.")
        with open(path, "rb") as f:
            raw = f.read()
        doc = json.loads(zlib.decompress(raw[len(MAGIC):]).decode())
    except (OSError, zlib.error, ValueError, UnicodeDecodeError) as e:
        raise RecordingError(f"{path} is a damaged rank file ({type(e).__name__}).") from None
    ok = (isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("variant"), str)
          and os.path.basename(doc["variant"]) == doc["variant"] and doc["variant"].endswith(".tvrec")
          and isinstance(doc.get("run"), dict) and isinstance(doc.get("passes"), list)
          and isinstance(doc.get("graphs"), list) and isinstance(doc.get("tables"), dict))
    if not ok:
        raise RecordingError(f"{path} is not a valid rank file.")
    if doc.get("version", 1) > 1:
        raise RecordingError(f"{path} was written by a newer thundervis: upgrade thundervis to read it.")
    return doc


_SCALAR = (str, int, float, type(None))


def _scalars(row, n: int) -> Optional[list]:
    if not isinstance(row, list) or len(row) != n or not all(isinstance(v, _SCALAR) and not isinstance(v, bool)
                                                             for v in row):
        return None
    return row


def _overlay(conn: sqlite3.Connection, doc: dict) -> None:
    """Lay the rank's rows over the variant recording on ``conn`` (temporary objects only)."""
    run = doc["run"]
    conn.execute("CREATE TEMP TABLE run AS SELECT * FROM main.run WHERE 0")
    cols = [c for c in RUN_COLUMNS if c in run and isinstance(run[c], _SCALAR)]
    conn.execute(f"INSERT INTO temp.run({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                 [run[c] for c in cols])
    for table in OWN_TABLES:
        spec = doc["tables"].get(table) or {}
        columns, rows = spec.get("columns") or [], spec.get("rows") or []
        conn.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM main.{table} WHERE 0")
        known = {r[1] for r in conn.execute(f"PRAGMA temp.table_info({table})")}
        if not columns or not all(isinstance(c, str) and c in known for c in columns):
            continue
        good = [r for r in (_scalars(r, len(columns)) for r in rows) if r is not None]
        conn.executemany(f"INSERT INTO temp.{table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         good)
    conn.execute("CREATE TEMP TABLE rank_passes (graph_id INTEGER, chain TEXT, idx INTEGER, duration_ms REAL,"
                 " recorded_at REAL, trace_json TEXT, meta TEXT, PRIMARY KEY (graph_id, chain, idx))")
    base = {(g, c, i): m for g, c, i, m in conn.execute("SELECT graph_id, chain, idx, meta FROM main.passes")}
    rows = []
    for r in doc["passes"]:
        if not (isinstance(r, list) and len(r) == 7 and _scalars(r[:6], 6) is not None):
            continue
        meta = None
        if isinstance(r[6], dict):
            try:
                merged = json.loads(base.get((r[0], r[1], r[2])) or "{}")
                merged.update({k: v for k, v in r[6].items() if isinstance(v, (str, int, float, bool))})
                meta = json.dumps(merged)
            except (ValueError, AttributeError):
                meta = None
        rows.append(r[:6] + [meta])
    conn.executemany("INSERT OR REPLACE INTO temp.rank_passes VALUES (?,?,?,?,?,?,?)", rows)
    conn.execute("CREATE TEMP TABLE rank_graphs (id INTEGER PRIMARY KEY, started_at REAL, compile_s REAL)")
    conn.executemany("INSERT OR REPLACE INTO temp.rank_graphs VALUES (?,?,?)",
                     [r for r in (_scalars(r, 3) for r in doc["graphs"]) if r is not None])
    # A rank's trace reference differs from the variant's only by its seq_nr offset.
    conn.execute(
        "CREATE TEMP VIEW passes AS SELECT p.graph_id AS graph_id, p.chain AS chain, p.idx AS idx, p.name AS name,"
        " COALESCE(t.duration_ms, p.duration_ms) AS duration_ms, p.changed AS changed, p.n_symbols AS n_symbols,"
        " p.symbols_from AS symbols_from,"
        " CASE WHEN p.trace_json IS NOT NULL AND t.trace_json IS NOT NULL"
        "      AND substr(t.trace_json, 1, 80) = substr(p.trace_json, 1, 80) THEN t.trace_json ELSE p.trace_json END"
        " AS trace_json, p.printed AS printed,"
        " COALESCE(t.meta, p.meta) AS meta,"
        " COALESCE(t.recorded_at, p.recorded_at) AS recorded_at"
        " FROM main.passes p LEFT JOIN temp.rank_passes t"
        " ON t.graph_id = p.graph_id AND t.chain = p.chain AND t.idx = p.idx")
    conn.execute(
        "CREATE TEMP VIEW graphs AS SELECT g.id AS id, g.compile_id AS compile_id, g.reason AS reason,"
        " g.recompile_reason AS recompile_reason, g.graph_break_reason AS graph_break_reason,"
        " g.n_inputs AS n_inputs, g.n_nodes AS n_nodes, g.info AS info,"
        " COALESCE(t.started_at, g.started_at) AS started_at, COALESCE(t.compile_s, g.compile_s) AS compile_s"
        " FROM main.graphs g LEFT JOIN temp.rank_graphs t ON t.id = g.id")


def open_rank_file(path: str, *, check: bool = True):
    """Open a ``.tvrank`` as a :class:`~.reader.Recording` (its variant recording with the rank's
    part laid over it); RecordingError (one sentence) when it or its variant cannot be read."""
    path = os.path.abspath(path)
    doc = read_rank_file(path)
    variant = os.path.join(os.path.dirname(path), doc["variant"])
    if not os.path.exists(variant):
        raise RecordingError(
            f"{os.path.basename(path)} holds only what is particular to its rank (run, status, times); its "
            f"graphs, passes and kernels are in {doc['variant']} and its traces in traces.tvstore of the same "
            "group folder, and they are not next to it: copy the whole group folder.")
    base = open_recording(variant, check=check)
    if base.__class__ is not Recording:
        base.close()
        raise RecordingError(f"{path} stands on another rank file; its group folder is damaged.")
    uri, version = base._uri, base.schema_version
    base.close()
    return RankRecording(path, uri, version, doc, variant)


class RankRecording(Recording):
    """A rank file read as a recording: the variant's file with the rank's part laid over it on
    every connection (see the module docstring)."""

    def __init__(self, path: str, uri: str, version: int, doc: dict, variant: str):
        self._doc = doc
        self.variant_path = variant
        try:
            conn = _connect(uri)
            _overlay(conn, doc)
        except sqlite3.Error as e:
            raise RecordingError(f"{path} cannot be laid over {os.path.basename(variant)} ({e}).") from None
        super().__init__(path, uri, version, conn)

    def _prepare_connection(self, conn: sqlite3.Connection) -> None:
        _overlay(conn, self._doc)
