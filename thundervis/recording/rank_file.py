"""Writing rank files of a packed group: what is particular to one rank, on top of its variant's
recording (group code, above the reader; reading a ``.tvrank`` is :mod:`.rank_store`'s).

After :func:`~.group_store.pack_group`, ranks that compiled the same graphs into the same traces
(one *variant*, see :func:`variant_fingerprint`) keep one packed recording between them: the first
such rank's ``rank-NNNNN.tvrec``. Every other rank of the variant becomes ``rank-NNNNN.tvrank``
(:func:`write_rank_file`): a small zlib-compressed JSON document (magic line ``TVRANK1``) holding
what differs between ranks — its run row, its events, each pass's duration, time and ``seq_nr``
offset, each graph's compile time, its kernel and chain timings and re-run results — and the name
and fingerprint of the variant recording it stands on.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zlib
from typing import Optional

from .packed_store import ref_fp
from .rank_store import FORMAT, MAGIC, OPTIONAL_TABLES, OWN_TABLES, RUN_COLUMNS, is_rank_file, read_rank_file  # noqa: F401


def variant_fingerprint(conn: sqlite3.Connection) -> str:
    """Return the fingerprint of what a packed recording shares with ranks that compiled the same
    traces: graphs (what was compiled), chains, passes (names, trace references without the
    ``seq_nr`` offset), kernels and which fold which, failures, recorded sources. Times, the run and events are left out."""
    h = hashlib.sha256()

    def feed(sql):
        for row in conn.execute(sql):
            h.update(repr(row).encode())
        h.update(b"|")
    feed("SELECT id, compile_id, reason, recompile_reason, graph_break_reason, n_inputs, n_nodes FROM graphs ORDER BY id")
    feed("SELECT graph_id, kind, status, error FROM chains ORDER BY graph_id, kind")
    for row in conn.execute("SELECT graph_id, chain, idx, name, changed, n_symbols, symbols_from, trace_json, printed"
                            " FROM passes ORDER BY graph_id, chain, idx"):
        h.update(repr(row[:7] + (ref_fp(row[7]) or row[7], row[8])).encode())
    h.update(b"|")
    feed("SELECT id, graph_id, chain, name, executor, uid, pass_name, language, code, members, ops, inputs,"
         " outputs, source_lines, note, trace_json FROM kernels ORDER BY id")
    feed("SELECT graph_id, chain, error FROM failures ORDER BY id")
    if _has_table(conn, "kernel_folds"):  # a folded kernel's code is its first instance's
        feed("SELECT kernel_id, fold_of FROM kernel_folds ORDER BY kernel_id")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='sources'").fetchone():
        feed("SELECT file, text, size, sha256 FROM sources ORDER BY file")
    return h.hexdigest()


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list, list]:
    cur = conn.execute(f"SELECT * FROM {table}")
    return [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]


def _has_table(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


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
           "tables": {t: dict(zip(("columns", "rows"), _rows(conn, t))) for t in OWN_TABLES
                      if t not in OPTIONAL_TABLES or _has_table(conn, t)}}
    data = MAGIC + zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)
    tmp = f"{out_path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out_path)
