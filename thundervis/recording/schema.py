"""The SQLite schema of a recording (one ``.tvrec`` file per run).

A recording is marked by ``PRAGMA application_id`` (:data:`APPLICATION_ID`, the bytes "TVRC") and
versioned by ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`). The reader refuses files whose
version is newer than the one it knows. Every table is plain data: JSON text, numbers and strings;
nothing is pickled and nothing stored here is ever executed.

Tables (see docs/recording.md for the meaning of each column):

- ``meta``: key/value facts about the file (format name, writer version).
- ``run``: exactly one row: what ran, where, with which versions, its status and traceback.
- ``graphs``: one row per compiled Dynamo graph, with why it was compiled (graph break, recompile).
- ``chains``: the chains of a graph (dynamo, joint, forward, backward, inference) and their status.
- ``passes``: every pass of every chain: name, duration, changed, symbol count, trace JSON, text
  (both compressed, see :func:`compress_text`; from schema 4 possibly a delta against an earlier
  pass of the chain, ``delta_base``, see pass_deltas.py).
- ``symbol_rows`` / ``pass_symbols`` (schema 4): every distinct bound symbol once, and each pass's
  list of them in walk order; ``symbols`` (schema 1-3, empty from 4): one row per symbol per pass.
  Either way, for lineage queries;
  a pass that changed nothing shares the rows, JSON and text of the pass before it
  (``passes.symbols_from``; the reader gives it its own name, header and meta back). The rows are
  an index over each pass's trace JSON: the writer stores them when the run ends, and the reader
  derives them from the JSON for a run that never ended.
- ``kernels``: kernels built by fusion executors (the kernel record of the compiler).
- ``failures``: compile or first-call failures reported by the compiler (the chain ran eagerly).
- ``events``: runtime events and notes (forced ``torch.compile`` options, writer problems ...).
- ``kernel_timings``: aggregated per-kernel / per-op timings (filled by profiling; empty for now).
- ``graph_timings``: aggregated per-chain call times (filled by profiling; empty for now).
- ``rerun_results``: results of re-running one kernel on its own (empty for now).
- ``kernel_numerics`` / ``eager_comparisons``: ``run --check-numerics`` / ``--compare-eager``
  results (recording/numerics.py); older recordings lack them and read as "not checked".
- ``sources``: the text of each user source file the recorded symbols point at, as it was when the
  run compiled it (views show a symbol's line with context from it; never executed). Recordings
  written before it existed lack the table; readers treat that as "not stored".
- ``kernel_builds``: one row per Triton kernel and GPU target compiled ahead of time (``--target``):
  status (``ok``, ``failed``, ``unplanned``, ``unfinished``), the error (ptxas's message), resources,
  occupancy, and a JSON summary (plan, instruction mix, per-function resources, Triton line -> symbol
  uid); ``kernel_build_stages``: the compiled stages of each distinct build, stored once per build
  and target (zlib-compressed JSON: the Triton source compiled, TTIR, TTGIR, LLVM IR, PTX, SASS and
  each stage's line map). Older recordings lack both tables; readers treat that as "no builds".
- ``symbol_costs``: the roofline cost (bytes read and written, FLOPs, precision) of every top-level
  symbol of each chain's final (``codegen``) pass, in call order (``compiler/roofline_cost.py``),
  written with that pass; views model it on a GPU without reading the trace. Older recordings lack
  the table; readers then cost the final traces themselves.
"""
from __future__ import annotations

import sqlite3
import zlib
from typing import Optional

from .schema_later import LATER_TABLES

APPLICATION_ID = 0x54565243  # "TVRC"
# 2: run.host and run.process_start (see liveness.py). Readers read version 1 files as they are:
# the columns they lack read as NULL.
# 3: compact storage: symbol rows point at shared symbol_sources rows (file, code, module,
# function), the heavy texts (passes.trace_json and printed, kernels.code and trace_json,
# sources.text) are zlib-compressed UTF-8 blobs (:func:`compress_text`), and kernels.record keeps
# only the fields without a column. Readers take text or blob in those columns (the store's
# ``text()``), so versions 1 and 2 read as they are.
# 4: pass traces stored compactly: symbol rows content-addressed (``symbol_rows``, one row per
# distinct symbol, and ``pass_symbols``, each pass's list of row ids), and a pass's trace JSON and
# printed text stored as a compressed delta against an earlier pass of its chain
# (``passes.delta_base``, a full snapshot at least every MAX_DELTA_CHAIN passes). Readers take
# versions 1 to 3 as they are (their ``symbols`` rows, full texts).
SCHEMA_VERSION = 4
FORMAT_NAME = "thundervis-recording"

TABLES = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT
);

CREATE TABLE run (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    script      TEXT,              -- absolute path of the script (NULL for -m)
    module      TEXT,              -- module name for -m (NULL for a script)
    argv        TEXT NOT NULL,     -- JSON list: sys.argv as the script saw it
    cwd         TEXT NOT NULL,
    python      TEXT, torch TEXT, triton TEXT, thundervis TEXT,
    device      TEXT,              -- "cpu" or the CUDA device name
    executors   TEXT,              -- JSON list or NULL (defaults)
    started_at  REAL NOT NULL,     -- unix time
    ended_at    REAL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
    exit_code   INTEGER,
    traceback   TEXT,
    pid         INTEGER,
    host        TEXT,              -- host name of the process (schema 2)
    process_start TEXT             -- token of the process's start (liveness.process_token; schema 2)
);

CREATE TABLE graphs (
    id                 INTEGER PRIMARY KEY,   -- the compiler's graph number
    compile_id         TEXT,                  -- Dynamo's "frame/compile" id when known
    reason             TEXT,                  -- why this graph was compiled (one line)
    recompile_reason   TEXT,                  -- guard failure that caused a recompile
    graph_break_reason TEXT,                  -- the graph break that ended this graph
    n_inputs           INTEGER,
    n_nodes            INTEGER,
    info               TEXT,                  -- JSON: everything the compiler reported
    started_at         REAL NOT NULL,
    compile_s          REAL                   -- NULL until the graph finished compiling
);

CREATE TABLE chains (
    graph_id  INTEGER NOT NULL REFERENCES graphs(id),
    kind      TEXT NOT NULL,                  -- dynamo | joint | forward | backward | inference
    status    TEXT NOT NULL,                  -- compiling | compiled | failed
    error     TEXT,
    PRIMARY KEY (graph_id, kind)
);

CREATE TABLE passes (
    graph_id    INTEGER NOT NULL,
    chain       TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    changed     INTEGER NOT NULL,
    n_symbols   INTEGER NOT NULL,
    symbols_from INTEGER NOT NULL,            -- the pass holding this pass's symbol rows, trace
                                              -- JSON and text: itself, or the identical pass
                                              -- before it when this one changed nothing
    trace_json  TEXT,                         -- compiler.serialize.trace_to_json (NULL: shared)
    printed     TEXT,                         -- compiler.printer.print_trace (NULL: shared)
    meta        TEXT NOT NULL,                -- JSON: the trace's own meta (duration, codegen source)
    recorded_at REAL NOT NULL,
    delta_base  INTEGER,                      -- schema 4: NULL, or the earlier pass of the chain whose
                                              -- texts trace_json and printed are deltas against
                                              -- (recording/pass_deltas.py; at most MAX_DELTA_CHAIN deep)
    PRIMARY KEY (graph_id, chain, idx)
);

CREATE TABLE symbols (
    graph_id  INTEGER NOT NULL,
    chain     TEXT NOT NULL,
    pass_idx  INTEGER NOT NULL,
    position  INTEGER NOT NULL,               -- order in the pass's walk (top level, then subsymbols)
    uid       TEXT NOT NULL,
    parent    TEXT,                           -- uid of the enclosing symbol for subsymbols
    sym       TEXT NOT NULL,
    origin    TEXT NOT NULL,                  -- JSON list of uids in the previous pass
    file      TEXT, line INTEGER, code TEXT, module TEXT, function TEXT,
    seq_nr    INTEGER,                        -- forward <-> backward link from AOTAutograd
    aten      TEXT,
    executor  TEXT,
    note      TEXT,
    source_id INTEGER,                        -- schema 3: symbol_sources row holding file, code,
                                              -- module, function (then NULL here)
    PRIMARY KEY (graph_id, chain, pass_idx, position)
);

-- Schema 4: symbol rows stored once per distinct content (uid, parent, op, origin, line, seq_nr,
-- aten, executor, note, source location), shared by every pass (and graph) holding that symbol
-- unchanged; ``pass_symbols`` lists each pass's rows in walk order. ``symbols`` stays empty.
CREATE TABLE symbol_rows (
    id        INTEGER PRIMARY KEY,
    uid       TEXT NOT NULL,
    parent    TEXT,
    sym       TEXT NOT NULL,
    origin    TEXT NOT NULL,                  -- JSON list of uids in the previous pass
    line      INTEGER,
    seq_nr    INTEGER,
    aten      TEXT,
    executor  TEXT,
    note      TEXT,
    source_id INTEGER                         -- symbol_sources row: file, code, module, function
);

CREATE TABLE pass_symbols (
    graph_id  INTEGER NOT NULL,
    chain     TEXT NOT NULL,
    pass_idx  INTEGER NOT NULL,
    rows      BLOB NOT NULL,                  -- zlib of the symbol_rows ids in walk order, as
                                              -- comma-separated differences (first id, then steps)
    PRIMARY KEY (graph_id, chain, pass_idx)
);

-- Schema 3: the source location of symbols (file, code line, module path, function), stored once
-- and shared by every symbol row pointing at it: most symbols of a chain repeat a few lines.
CREATE TABLE symbol_sources (
    id        INTEGER PRIMARY KEY,
    file      TEXT, code TEXT, module TEXT, function TEXT
);

CREATE TABLE kernels (
    id           INTEGER PRIMARY KEY,
    graph_id     INTEGER NOT NULL,
    chain        TEXT NOT NULL,
    name         TEXT NOT NULL,               -- e.g. fw_fusion_3
    executor     TEXT NOT NULL,
    uid          TEXT,                        -- uid of the fusion symbol in the trace
    pass_name    TEXT,
    language     TEXT,
    code         TEXT,                        -- generated source (data: never executed by viewers)
    members      TEXT NOT NULL,               -- JSON list of member uids
    ops          TEXT NOT NULL,               -- JSON list of member prim names
    inputs       TEXT NOT NULL,               -- JSON list of {name, shape, dtype, device, strides}
    outputs      TEXT NOT NULL,
    source_lines TEXT NOT NULL,               -- JSON list of {file, line, code, module, direction}
    note         TEXT,
    trace_json   TEXT,                        -- JSON of a standalone trace of the region (rerun)
    record       TEXT NOT NULL,               -- JSON: the record's fields that have no column (an
                                              -- executor's details, fields added later); schema < 3:
                                              -- the whole record, repeating code and region IR
    UNIQUE (graph_id, chain, name)
);

CREATE TABLE failures (
    id        INTEGER PRIMARY KEY,
    graph_id  INTEGER NOT NULL,
    chain     TEXT,                           -- NULL: the whole graph ran eagerly
    error     TEXT NOT NULL,
    traceback TEXT,
    at        REAL NOT NULL
);

CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    graph_id INTEGER,
    chain    TEXT,
    event    TEXT NOT NULL,
    data     TEXT,                            -- JSON
    at       REAL NOT NULL
);

-- Aggregated timings: one row per (graph, chain, uid, device, method), updated in place so a long
-- profiled run does not grow the file without bound. kernel_id is NULL for torch-executor ops.
CREATE TABLE kernel_timings (
    id            INTEGER PRIMARY KEY,
    graph_id      INTEGER NOT NULL,
    chain         TEXT NOT NULL,
    uid           TEXT NOT NULL,              -- the symbol timed (fusion or torch op)
    kernel_id     INTEGER REFERENCES kernels(id),
    device        TEXT NOT NULL,
    method        TEXT NOT NULL,              -- "cuda-device" | "host"
    calls         INTEGER NOT NULL,
    median_ms     REAL, min_ms REAL, max_ms REAL, total_ms REAL,
    share         REAL,                       -- fraction of the chain's time
    bytes_read    INTEGER, bytes_written INTEGER, gbps REAL,
    name          TEXT,                       -- kernel name or symbol name (prims.mm ...)
    executor      TEXT,
    kind          TEXT,                       -- "fusion" | "op"
    position      INTEGER,                    -- call order within the chain
    samples       TEXT,                       -- JSON list: ms of each profiled call (at most K)
    starts        TEXT,                       -- JSON list: start offset (ms) within each profiled call
    UNIQUE (graph_id, chain, uid, device, method)
);

CREATE TABLE graph_timings (
    graph_id  INTEGER NOT NULL,
    chain     TEXT NOT NULL,
    device    TEXT NOT NULL,
    method    TEXT NOT NULL,
    calls     INTEGER NOT NULL,
    median_ms REAL, min_ms REAL, max_ms REAL, total_ms REAL,
    warmup      INTEGER,                      -- calls before profiling started
    partial     INTEGER,                      -- 1: the run ended before K calls were profiled
    call_starts TEXT,                         -- JSON list: start (ms) of each profiled call
    call_walls  TEXT,                         -- JSON list: wall time (ms) of each untimed call after
                                              -- the profiled ones (older recordings lack the column)
    PRIMARY KEY (graph_id, chain, device, method)
);

-- One row per re-run of one kernel on its own with one executor.
CREATE TABLE rerun_results (
    id            INTEGER PRIMARY KEY,
    kernel_id     INTEGER NOT NULL REFERENCES kernels(id),
    executor      TEXT NOT NULL,
    device        TEXT NOT NULL,
    inputs        TEXT NOT NULL,              -- "random" | "captured"
    iters         INTEGER,
    status        TEXT NOT NULL,              -- ok | failed | unavailable
    median_ms     REAL, min_ms REAL,
    max_abs_error REAL, max_rel_error REAL,
    detail        TEXT,                       -- error message or notes
    at            REAL NOT NULL
);

-- run --check-numerics: one row per checked kernel (worst over its first K calls). max_* : the
-- kernel against the float64 reference of its region on the same inputs; eager_* : eager float32
-- of the same region against that reference; ratio = max_rel / eager_rel (tolerance-floored).
-- Recordings without it read as "not checked" (recording/numerics.py).
CREATE TABLE IF NOT EXISTS kernel_numerics (
    graph_id      INTEGER NOT NULL,
    chain         TEXT NOT NULL,
    kernel        TEXT NOT NULL,              -- kernel name (kernels.name)
    uid           TEXT,
    executor      TEXT,
    calls         INTEGER NOT NULL,
    max_abs_error REAL, max_rel_error REAL,
    eager_abs_error REAL, eager_rel_error REAL,
    ratio         REAL,
    tolerance     REAL,                       -- the rel error above which the kernel is flagged
    verdict       TEXT NOT NULL,              -- ok | flagged | skipped | error
    detail        TEXT,
    PRIMARY KEY (graph_id, chain, kernel)
);

-- run --compare-eager: one row per chain: compiled outputs (forward) or gradients (backward)
-- against the chain's ATen graph run eagerly on the same inputs, worst over the first K calls.
CREATE TABLE IF NOT EXISTS eager_comparisons (
    graph_id      INTEGER NOT NULL,
    chain         TEXT NOT NULL,
    calls         INTEGER NOT NULL,
    max_abs_delta REAL, max_rel_delta REAL,
    outputs       TEXT,                       -- JSON list: {index, max_abs, max_rel} per output
    detail        TEXT,
    PRIMARY KEY (graph_id, chain)
);

-- The user's source files the symbols point at (text as compiled; data, never executed).
CREATE TABLE sources (
    file   TEXT PRIMARY KEY,                  -- path as in symbols.file
    text   TEXT,                              -- NULL: could not be read, or larger than the limit
    size   INTEGER,
    sha256 TEXT
);
""" + LATER_TABLES


# Created when the run ends rather than up front: keeping them up to date on every insert would slow
# the compile down; a recording of a killed run has none and its queries scan instead.
INDEXES = """
CREATE INDEX IF NOT EXISTS symbols_by_uid ON symbols (graph_id, uid);
CREATE INDEX IF NOT EXISTS symbols_by_line ON symbols (line, file);
CREATE INDEX IF NOT EXISTS symbols_by_seq ON symbols (graph_id, seq_nr);
CREATE INDEX IF NOT EXISTS symbol_rows_by_uid ON symbol_rows (uid);
CREATE INDEX IF NOT EXISTS symbol_rows_by_line ON symbol_rows (line);
"""


# The keys of a kernel record (compiler.serialize.kernel_to_dict) stored in their own columns of
# ``kernels`` (``pass`` is pass_name, ``trace`` is trace_json): ``kernels.record`` keeps only the rest,
# so each kernel's code and region IR are stored once.
KERNEL_COLUMN_KEYS = frozenset(("name", "executor", "uid", "pass", "language", "code", "members", "ops", "inputs",
                                "outputs", "source_lines", "note", "trace"))


INSERT_SYMBOL_ROW = ("INSERT OR REPLACE INTO symbols(graph_id, chain, pass_idx, position, uid, parent, sym,"
                     " origin, file, line, code, module, function, seq_nr, aten, executor, note, source_id)"
                     " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
INSERT_SYMBOL_CONTENT = ("INSERT INTO symbol_rows(id, uid, parent, sym, origin, line, seq_nr, aten, executor, note,"
                         " source_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)")
INSERT_PASS_SYMBOLS = "INSERT OR REPLACE INTO pass_symbols(graph_id, chain, pass_idx, rows) VALUES (?,?,?,?)"
INSERT_SYMBOL_SOURCE = "INSERT INTO symbol_sources(id, file, code, module, function) VALUES (?,?,?,?,?)"


TEXT_LEVEL = 6  # zlib level of stored texts: most of the size win of 9 at a third of the time


def compress_text(text: Optional[str]) -> Optional[bytes]:
    """Return ``text`` as it is stored in a compressed text column (schema 3): zlib-compressed
    UTF-8 (None stays None). The store's ``text()`` reads it back, under a size cap."""
    if not isinstance(text, str):
        return None
    return zlib.compress(text.encode("utf-8", "surrogatepass"), TEXT_LEVEL)


def create_indexes(conn: sqlite3.Connection) -> None:
    """Create the lookup indexes (idempotent)."""
    conn.executescript("BEGIN;\n" + INDEXES + "\nCOMMIT;")


def create_schema(conn: sqlite3.Connection, writer_version: str) -> None:
    """Create every table in the empty database ``conn`` and stamp it as a recording."""
    conn.executescript("BEGIN;\n" + TABLES + "\nCOMMIT;")
    with conn:
        conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                         [("format", FORMAT_NAME), ("writer", writer_version),
                          ("schema", str(SCHEMA_VERSION))])
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
