"""Traces stored once per group: ``traces.tvstore``, addressed by fingerprint, and rank files that
refer to it.

Ranks of a data-parallel job compile the same graphs into the same traces. Once a rank's run has
ended, :func:`pack_group` moves the heavy text of its recording (each pass's trace JSON and printed
trace, each kernel's code and region IR, each recorded source file) into the group's
``traces.tvstore`` (SQLite, one zlib-compressed row per distinct text, keyed by the SHA-256 of the
text) and leaves a reference in its place; it drops the symbol rows (an index the reader derives
from the trace JSON) and compacts the file. What differs between ranks is not moved: a pass's
duration lives in ``passes.meta``, and the stored trace JSON and printed text are the
*canonical* ones without it (the reader puts the rank's own duration back), so identical traces of
two ranks are one row however long each rank took.

Reading a packed file is the packed store's (:mod:`.packed_store`, under the reader); this module
is group code above the reader: it writes. Safety: a packed rank file stays a complete recording of everything but those texts: run, status,
graphs, chains, passes, kernels (names, members, sources), failures, events, timings. Sent alone it
opens with ``ls`` and says which texts are missing; asking for one raises a
:class:`~.reader.RecordingError` naming ``traces.tvstore`` and the fingerprint. References are only
honoured in files whose ``meta`` says they were packed, and every blob read is checked against its
fingerprint, so a store that does not belong to the rank is reported, never shown. Runs still going
(or killed: their file may still be written by nobody, but it is left as it was) are not packed.
"""
from __future__ import annotations

import json
import os
import sqlite3
import zlib
from typing import Optional
from urllib.parse import quote

from .errors import RecordingError
from .group_texts import canonical_trace
from .pass_deltas import JSON_SEPARATOR, TEXT_SEPARATOR, apply_delta
from .typed import decompress
from .schema import KERNEL_COLUMN_KEYS
from .packed_store import PACKED_KEY, STORE_APPLICATION_ID, STORE_NAME, STORE_TABLES, fingerprint, make_ref  # noqa: F401



def _plain(value, path: str) -> Optional[str]:
    """Return a stored text column's text (schema 3 stores it compressed)."""
    if isinstance(value, (bytes, bytearray)):
        return decompress(value, "a stored text", path).decode("utf-8", "surrogatepass")
    return value


def _printed_body(printed: str) -> str:
    """Return a printed trace without its header line (it holds the pass's duration)."""
    return printed.split("\n", 1)[1] if printed.startswith("# graph ") and "\n" in printed else printed


# -- packing ----------------------------------------------------------------------------------

def open_group_store(path: str) -> sqlite3.Connection:
    """Open (creating it when needed) the group store at ``path`` for writing."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {STORE_APPLICATION_ID}")
    conn.executescript(STORE_TABLES)
    return conn


def _put(store: sqlite3.Connection, text: str, seen: set, seq_offset: int = 0) -> str:
    fp = fingerprint(text)
    if fp not in seen:
        raw = text.encode("utf-8", "surrogatepass")
        store.execute("INSERT OR IGNORE INTO blobs(fp, size, data) VALUES (?,?,?)",
                      (fp, len(raw), zlib.compress(raw, 6)))
        seen.add(fp)
    return make_ref(fp, seq_offset)


def pack_rank(path: str, store: sqlite3.Connection, seen: Optional[set] = None) -> bool:
    """Move the texts of the finished rank recording at ``path`` into ``store`` (see the module
    docstring) and compact it; return False (file untouched) when its run has not ended or it is
    already packed."""
    from .liveness import run_status
    seen = set() if seen is None else seen
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        row = conn.execute("SELECT status, pid, host, process_start FROM run").fetchone()
        if row is None or run_status(*row) in ("running", "killed"):
            return False
        if conn.execute("SELECT 1 FROM meta WHERE key=?", (PACKED_KEY,)).fetchone():
            return False
        store.execute("BEGIN")
        conn.execute("BEGIN IMMEDIATE")
        _pack_passes(conn, store, path, seen)
        _pack_kernels(conn, store, path, seen)
        _pack_sources(conn, store, path, seen)
        _drop_derived_rows(conn)
        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (PACKED_KEY, STORE_NAME))
        store.execute("COMMIT")  # the texts are safe in the store before the rank file refers to them
        conn.execute("COMMIT")
    except BaseException:
        for c in (conn, store):
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        conn.close()
        raise
    _compact(conn)
    conn.close()
    return True


def _pack_passes(conn: sqlite3.Connection, store: sqlite3.Connection, path: str, seen: set) -> None:
    """Move every pass's texts (schema 4 deltas applied: the store keeps whole texts, deduplicated
    across ranks) into ``store``; the rank file keeps their references."""
    deltas = any(r[1] == "delta_base" for r in conn.execute("PRAGMA table_info(passes)"))
    full: dict[tuple, tuple] = {}  # (graph, chain, idx) -> its full texts (schema 4 deltas applied)
    for g, c, i, tj, pr, base in conn.execute(
            "SELECT graph_id, chain, idx, trace_json, printed, " + ("delta_base" if deltas else "NULL") +
            " FROM passes ORDER BY graph_id, chain, idx").fetchall():
        if tj is None and pr is None:
            continue
        tj, pr = _plain(tj, path), _plain(pr, path)
        if base is not None:  # the group store keeps whole texts, deduplicated across ranks
            if (g, c, base) not in full or tj is None or pr is None:
                raise ValueError(f"graph {g} {c} pass {i} is a delta against a missing pass")
            what = f"the delta of graph {g} {c} pass {i}"
            tj = apply_delta(full[(g, c, base)][0], tj, JSON_SEPARATOR, what, path)
            pr = apply_delta(full[(g, c, base)][1], pr, TEXT_SEPARATOR, what, path)
        full[(g, c, i)] = (tj, pr)
        new_tj = None
        if tj is not None:
            canonical, offset = canonical_trace(tj)
            new_tj = _put(store, canonical, seen, offset)
        new_pr = _put(store, _printed_body(pr), seen) if pr is not None else None
        conn.execute("UPDATE passes SET trace_json=?, printed=? WHERE graph_id=? AND chain=? AND idx=?",
                     (new_tj, new_pr, g, c, i))
    if deltas:
        conn.execute("UPDATE passes SET delta_base=NULL")


def _pack_kernels(conn: sqlite3.Connection, store: sqlite3.Connection, path: str, seen: set) -> None:
    """Move every kernel's code and region IR into ``store``; drop the record's copies of them."""
    for kid, code, tj in conn.execute("SELECT id, code, trace_json FROM kernels").fetchall():
        code, tj = _plain(code, path), _plain(tj, path)
        conn.execute("UPDATE kernels SET code=?, trace_json=? WHERE id=?",
                     (_put(store, code, seen) if code else code, _put(store, tj, seen) if tj else tj, kid))
    # A recording of schema < 3 repeats the columns (code, region IR under "trace") in the
    # kernel record: keep only the fields without a column.
    for kid, record in conn.execute("SELECT id, record FROM kernels").fetchall():
        try:
            d = json.loads(record)
        except (ValueError, TypeError, RecursionError):
            continue
        if isinstance(d, dict) and KERNEL_COLUMN_KEYS & d.keys():
            d = {k: v for k, v in d.items() if k not in KERNEL_COLUMN_KEYS}
            conn.execute("UPDATE kernels SET record=? WHERE id=?", (json.dumps(d), kid))


def _pack_sources(conn: sqlite3.Connection, store: sqlite3.Connection, path: str, seen: set) -> None:
    """Move the recorded source files' texts (when the recording has them) into ``store``."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='sources'").fetchone():
        for f, text in conn.execute("SELECT file, text FROM sources").fetchall():
            text = _plain(text, path)
            if text:
                conn.execute("UPDATE sources SET text=? WHERE file=?", (_put(store, text, seen), f))


def _drop_derived_rows(conn: sqlite3.Connection) -> None:
    """Empty the symbol tables: indexes over the trace JSON that the reader derives again."""
    conn.execute("DELETE FROM symbols")  # an index over the trace JSON: the reader derives it
    for table in ("symbol_sources", "symbol_rows", "pass_symbols"):  # schema 3 and 4 symbol tables
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
            conn.execute(f"DELETE FROM {table}")


def _compact(conn: sqlite3.Connection) -> None:
    """Shrink the packed rank file: no journal, no lookup indexes, small pages, vacuumed."""
    conn.execute("PRAGMA journal_mode=DELETE")
    for idx in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL").fetchall():
        conn.execute(f'DROP INDEX IF EXISTS "{idx[0]}"')  # lookup indexes of the symbol rows, now empty
    conn.execute("PRAGMA page_size=1024")
    conn.execute("VACUUM")


def pack_group(group_dir: str) -> tuple[int, int]:
    """Pack every finished rank recording of the group folder: texts into ``traces.tvstore``
    (:func:`pack_rank`), then every rank whose graphs and traces equal an earlier rank's (same
    variant, :func:`~.rank_file.variant_fingerprint`) into a ``.tvrank`` file standing on that
    rank's recording. Return (rank files packed now, rank files left as they were)."""
    from .group import Group
    from .rank_file import variant_fingerprint, write_rank_file
    files = sorted((r, p) for r, (_, p) in Group(group_dir).rank_files().items() if p.endswith(".tvrec"))
    if not files:
        return 0, 0
    store = open_group_store(os.path.join(group_dir, STORE_NAME))
    seen: set = set()
    packed = left = 0
    try:
        for _, p in files:
            try:
                ok = pack_rank(p, store, seen)
            except (sqlite3.Error, ValueError, OSError, RecordingError):
                ok = False
            packed, left = packed + ok, left + (not ok)
        store.execute("PRAGMA journal_mode=DELETE")
    finally:
        store.close()
    variants: dict[str, str] = {}
    for _, p in files:
        try:
            conn = sqlite3.connect("file:" + quote(p) + "?mode=ro", uri=True)
            try:
                if not conn.execute("SELECT 1 FROM meta WHERE key=?", (PACKED_KEY,)).fetchone():
                    continue
                fp = variant_fingerprint(conn)
                if fp not in variants:
                    variants[fp] = os.path.basename(p)
                    continue
                base = sqlite3.connect("file:" + quote(os.path.join(group_dir, variants[fp])) + "?mode=ro", uri=True)
                try:
                    write_rank_file(conn, base, p[:-len(".tvrec")] + ".tvrank", variants[fp], fp)
                finally:
                    base.close()
            finally:
                conn.close()
            os.remove(p)  # the .tvrank (written atomically first) now stands for it
        except (sqlite3.Error, OSError, ValueError):
            continue
    return packed, left
