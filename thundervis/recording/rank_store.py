"""The rank overlay store: a ``.tvrank`` file read as a recording, behind the store protocol.

After :func:`~.group_store.pack_group`, ranks that compiled the same graphs into the same traces
(one *variant*) keep one packed recording between them; every other rank of the variant is a
``rank-NNNNN.tvrank``: a small zlib-compressed JSON document (magic line ``TVRANK1``) holding what
differs between ranks (run row, events, pass durations and ``seq_nr`` offsets, graph compile times,
timings, re-run results and numerics checks) and the name of the variant recording it stands on (written by
:mod:`.rank_file`, group code).

:class:`RankStore` opens the variant recording read-only and lays the rank's part over it on each
SQLite connection (temporary tables named like the recording's, which SQLite resolves first, and
temporary views joining the per-pass and per-graph times), so the reader reads a ``.tvrank`` exactly
as a recording. The document is checked before use: a regular file, at most 64 MB, expanding to at
most 128 MB, JSON nested at most 8 deep, fields of the right types; sent alone, a rank file says in
one sentence which files of its group folder it needs. Nothing in it is executed.
"""
from __future__ import annotations

import json
import os
import sqlite3
from typing import Optional

from .errors import RecordingError
from .file_store import FileStore, _sqlite_sentence, connect, prepare_connection
from .packed_store import PackedStore
from .typed import decompress, describe, load_json, regular_file

MAGIC = b"TVRANK1\n"
FORMAT = "thundervis-rank"
VERSION = 1
_MAX_BYTES = 64 << 20
_MAX_EXPANDED = 128 << 20
_MAX_DEPTH = 8

RUN_COLUMNS = ("id", "script", "module", "argv", "cwd", "python", "torch", "triton", "thundervis", "device",
               "executors", "started_at", "ended_at", "status", "exit_code", "traceback", "pid", "host",
               "process_start")
OWN_TABLES = ("events", "kernel_timings", "graph_timings", "rerun_results", "kernel_numerics", "eager_comparisons")
# Tables a recording may lack (older than them): a rank file carries them only when they exist.
OPTIONAL_TABLES = ("kernel_numerics", "eager_comparisons")


def is_rank_file(path: str) -> bool:
    """Return True when ``path`` is a regular file starting like a ``.tvrank`` file (a FIFO or a
    device is never opened here)."""
    try:
        regular_file(path)
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except (OSError, RecordingError):
        return False


def read_rank_file(path: str) -> dict:
    """Return the checked document of a ``.tvrank`` file; RecordingError (one sentence) if damaged."""
    st = regular_file(path, "rank file")
    if st.st_size > _MAX_BYTES:
        raise RecordingError(f"{path} is too large for a rank file.")
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_BYTES + 1)
    except OSError as e:
        raise RecordingError(f"{path} cannot be read ({e.strerror}).") from None
    if not raw.startswith(MAGIC):
        raise RecordingError(f"{path} is not a rank file.")
    data = decompress(raw[len(MAGIC):], "its document", path, _MAX_EXPANDED)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise RecordingError(f"{path} is a damaged rank file (not UTF-8).") from None
    doc = load_json(text, "its document", path, dict, depth=_MAX_DEPTH)
    if doc is None:
        raise RecordingError(f"{path} is not a valid rank file.")
    version = doc.get("version", 1)
    if version.__class__ is not int:
        raise RecordingError(f"{path} is not a valid rank file (its version is {describe(version)}).")
    if version > VERSION:
        raise RecordingError(f"{path} was written by a newer thundervis: upgrade thundervis to read it.")
    ok = (doc.get("format") == FORMAT and isinstance(doc.get("variant"), str)
          and os.path.basename(doc["variant"]) == doc["variant"] and doc["variant"].endswith(".tvrec")
          and isinstance(doc.get("run"), dict) and isinstance(doc.get("passes"), list)
          and isinstance(doc.get("graphs"), list) and isinstance(doc.get("tables"), dict)
          and all(isinstance(t, dict) for t in doc["tables"].values()))
    if not ok:
        raise RecordingError(f"{path} is not a valid rank file.")
    return doc


_SCALAR = (str, int, float, type(None))


def _scalars(row, n: int) -> Optional[list]:
    if not isinstance(row, list) or len(row) != n or not all(v.__class__ in _SCALAR for v in row):
        return None
    return row


def _overlay(conn: sqlite3.Connection, doc: dict) -> None:
    """Lay the rank's rows over the variant recording on ``conn`` (temporary objects only; the
    reader checks every value's type when it reads it)."""
    _overlay_run_and_tables(conn, doc["run"], doc["tables"])
    conn.execute("CREATE TEMP TABLE rank_passes (graph_id INTEGER, chain TEXT, idx INTEGER, duration_ms REAL,"
                 " recorded_at REAL, trace_json TEXT, meta TEXT, PRIMARY KEY (graph_id, chain, idx))")
    rows = _rank_pass_rows(conn, doc["passes"])
    conn.executemany("INSERT OR REPLACE INTO temp.rank_passes VALUES (?,?,?,?,?,?,?)", rows)
    conn.execute("CREATE TEMP TABLE rank_graphs (id INTEGER PRIMARY KEY, started_at REAL, compile_s REAL)")
    conn.executemany("INSERT OR REPLACE INTO temp.rank_graphs VALUES (?,?,?)",
                     [r for r in (_scalars(r, 3) for r in doc["graphs"]) if r is not None])
    _create_overlay_views(conn)


def _overlay_run_and_tables(conn: sqlite3.Connection, run: dict, tables: dict) -> None:
    """Create the temporary ``run`` row and the rank's own tables (``OWN_TABLES``) from the rank
    file's ``run`` and ``tables``, keeping only scalar values of known columns."""
    conn.execute("CREATE TEMP TABLE run AS SELECT * FROM main.run WHERE 0")
    cols = [c for c in RUN_COLUMNS if c in run and run[c].__class__ in _SCALAR]
    conn.execute(f"INSERT INTO temp.run({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                 [run[c] for c in cols])
    for table in OWN_TABLES:
        spec = tables.get(table) or {}
        columns, rows = spec.get("columns") or [], spec.get("rows") or []
        if table in OPTIONAL_TABLES and not conn.execute(
                "SELECT 1 FROM main.sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
            continue
        conn.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM main.{table} WHERE 0")
        known = {r[1] for r in conn.execute(f"PRAGMA temp.table_info({table})")}
        if not isinstance(columns, list) or not isinstance(rows, list) or not columns or not all(
                isinstance(c, str) and c in known for c in columns):
            continue
        good = [r for r in (_scalars(r, len(columns)) for r in rows) if r is not None]
        conn.executemany(f"INSERT INTO temp.{table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         good)


def _rank_pass_rows(conn: sqlite3.Connection, passes: list) -> list:
    """Return the rank file's well-formed pass rows, each with its meta merged over the variant's."""
    base = {(g, c, i): m for g, c, i, m in conn.execute("SELECT graph_id, chain, idx, meta FROM main.passes")}
    rows = []
    for r in passes:
        if not (isinstance(r, list) and len(r) == 7 and _scalars(r[:6], 6) is not None):
            continue
        meta = None
        if isinstance(r[6], dict):
            try:
                merged = json.loads(base.get((r[0], r[1], r[2])) or "{}")
                merged.update({k: v for k, v in r[6].items() if isinstance(v, (str, int, float, bool))})
                meta = json.dumps(merged)
            except (ValueError, AttributeError, TypeError, RecursionError):
                meta = None
        rows.append(r[:6] + [meta])
    return rows


def _create_overlay_views(conn: sqlite3.Connection) -> None:
    """Create the ``passes`` and ``graphs`` views: the variant's rows with the rank's timings,
    meta and trace references laid over them."""
    columns = {r[1] for r in conn.execute("PRAGMA main.table_info(passes)")}
    extra = "".join(f", p.{c} AS {c}" for c in sorted(columns - _OVERLAID_PASS_COLUMNS))
    # A rank's trace reference differs from the variant's only by its seq_nr offset.
    conn.execute(
        "CREATE TEMP VIEW passes AS SELECT p.graph_id AS graph_id, p.chain AS chain, p.idx AS idx, p.name AS name,"
        " COALESCE(t.duration_ms, p.duration_ms) AS duration_ms, p.changed AS changed, p.n_symbols AS n_symbols,"
        " p.symbols_from AS symbols_from,"
        " CASE WHEN p.trace_json IS NOT NULL AND t.trace_json IS NOT NULL AND typeof(p.trace_json) = 'text'"
        "      AND substr(t.trace_json, 1, 80) = substr(p.trace_json, 1, 80) THEN t.trace_json ELSE p.trace_json END"
        " AS trace_json, p.printed AS printed,"
        " COALESCE(t.meta, p.meta) AS meta,"
        " COALESCE(t.recorded_at, p.recorded_at) AS recorded_at" + extra +
        " FROM main.passes p LEFT JOIN temp.rank_passes t"
        " ON t.graph_id = p.graph_id AND t.chain = p.chain AND t.idx = p.idx")
    conn.execute(
        "CREATE TEMP VIEW graphs AS SELECT g.id AS id, g.compile_id AS compile_id, g.reason AS reason,"
        " g.recompile_reason AS recompile_reason, g.graph_break_reason AS graph_break_reason,"
        " g.n_inputs AS n_inputs, g.n_nodes AS n_nodes, g.info AS info,"
        " COALESCE(t.started_at, g.started_at) AS started_at, COALESCE(t.compile_s, g.compile_s) AS compile_s"
        " FROM main.graphs g LEFT JOIN temp.rank_graphs t ON t.id = g.id")


_OVERLAID_PASS_COLUMNS = {"graph_id", "chain", "idx", "name", "duration_ms", "changed", "n_symbols", "symbols_from",
                          "trace_json", "printed", "meta", "recorded_at"}


class RankStore(PackedStore):
    """A ``.tvrank`` read as a recording (see the module docstring); ``variant_path`` is the
    recording it stands on, ``doc`` its checked document."""

    kind = "rank"

    def __init__(self, path: str, uri: str, version: int, doc: dict, variant: str,
                 conn: Optional[sqlite3.Connection] = None):
        self.doc = doc
        self.variant_path = variant
        try:
            if conn is None:
                conn = connect(uri)
                prepare_connection(conn)
            _overlay(conn, doc)
        except sqlite3.Error as e:
            if conn is not None:
                conn.close()
            raise RecordingError(f"{path} cannot be laid over {os.path.basename(variant)} ({e}).") from None
        super().__init__(path, uri, version, conn)

    @classmethod
    def open(cls, path: str, check: bool = True) -> "RankStore":
        """Open the ``.tvrank`` at ``path`` over its variant recording; RecordingError (one
        sentence) when it or its variant cannot be read."""
        doc = read_rank_file(path)
        variant = os.path.join(os.path.dirname(path), doc["variant"])
        if not os.path.lexists(variant):
            raise RecordingError(
                f"{os.path.basename(path)} holds only what is particular to its rank (run, status, times); its "
                f"graphs, passes and kernels are in {doc['variant']} and its traces in traces.tvstore of the same "
                "group folder, and they are not next to it: copy the whole group folder.")
        if is_rank_file(variant):
            raise RecordingError(f"{path} stands on another rank file; its group folder is damaged.")
        uri, version, conn = FileStore._open_checked(variant, check)
        # the checked connection carries the overlay: a group command opens thousands of ranks
        return cls(path, uri, version, doc, variant, conn)

    def prepare(self, conn: sqlite3.Connection) -> None:
        try:
            _overlay(conn, self.doc)
        except sqlite3.Error as e:
            raise RecordingError(_sqlite_sentence(self.path, e)) from None
