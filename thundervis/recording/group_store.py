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

Safety: a packed rank file stays a complete recording of everything but those texts: run, status,
graphs, chains, passes, kernels (names, members, sources), failures, events, timings. Sent alone it
opens with ``ls`` and says which texts are missing; asking for one raises a
:class:`~.reader.RecordingError` naming ``traces.tvstore`` and the fingerprint. References are only
honoured in files whose ``meta`` says they were packed, and every blob read is checked against its
fingerprint, so a store that does not belong to the rank is reported, never shown. Runs still going
(or killed: their file may still be written by nobody, but it is left as it was) are not packed.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import zlib
from typing import Optional
from urllib.parse import quote

STORE_NAME = "traces.tvstore"
STORE_APPLICATION_ID = 0x54565354  # "TVST"
REF_PREFIX = "@tvstore:sha256:"
PACKED_KEY = "packed_into"

_STORE_TABLES = """
CREATE TABLE IF NOT EXISTS blobs (
    fp   TEXT PRIMARY KEY,        -- sha256 hex of the uncompressed UTF-8 text
    size INTEGER NOT NULL,        -- uncompressed bytes
    data BLOB NOT NULL            -- zlib-compressed UTF-8 text
);
"""


def fingerprint(text: str) -> str:
    """Return the SHA-256 hex of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _ref(fp: str, seq_offset: int = 0) -> str:
    return REF_PREFIX + fp + (f"~{seq_offset}" if seq_offset else "")


def _parse_ref(text: Optional[str]) -> Optional[tuple[str, int]]:
    """Return (fingerprint, seq_nr offset) a reference names, or None when ``text`` is not one."""
    if not (isinstance(text, str) and text.startswith(REF_PREFIX)):
        return None
    body = text[len(REF_PREFIX):]
    fp, _, offset = body.partition("~")
    if len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp):
        return None
    if offset and not offset.lstrip("-").isdigit():
        return None
    return fp, int(offset or 0)


def _ref_fp(text: Optional[str]) -> Optional[str]:
    """Return the fingerprint a reference names, or None when ``text`` is not a reference."""
    parsed = _parse_ref(text)
    return parsed[0] if parsed else None


def _walk_symbols(symbols):
    for b in symbols if isinstance(symbols, list) else ():
        if isinstance(b, dict):
            yield b
            yield from _walk_symbols(b.get("subsymbols"))


def canonical_trace(trace_json: str) -> tuple[str, int]:
    """Return (a pass's trace JSON without what differs between ranks that compiled the same
    trace, the seq_nr offset taken out). Its ``meta`` (durations) is dropped; autograd's
    ``seq_nr`` counts every autograd op the process ran before, so it is stored relative to the
    smallest one of the pass (the offset goes in the reference and is added back on reading)."""
    d = json.loads(trace_json)
    d.pop("meta", None)
    seqs = [b["seq_nr"] for b in _walk_symbols(d.get("symbols")) if isinstance(b.get("seq_nr"), int)]
    offset = min(seqs) if seqs else 0
    if offset:
        for b in _walk_symbols(d.get("symbols")):
            if isinstance(b.get("seq_nr"), int):
                b["seq_nr"] -= offset
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False), offset


def canonical_trace_json(trace_json: str) -> str:
    """Return the canonical form of a pass's trace JSON (see :func:`canonical_trace`)."""
    return canonical_trace(trace_json)[0]


def _with_meta(canonical: str, meta_text: Optional[str], seq_offset: int = 0) -> str:
    d = json.loads(canonical)
    try:
        meta = json.loads(meta_text) if meta_text else {}
    except ValueError:
        meta = {}
    d["meta"] = {k: v for k, v in (meta if isinstance(meta, dict) else {}).items()
                 if isinstance(v, (int, float, str, bool))}
    if seq_offset:
        for b in _walk_symbols(d.get("symbols")):
            if isinstance(b.get("seq_nr"), int):
                b["seq_nr"] += seq_offset
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def _printed_body(printed: str) -> str:
    """Return a printed trace without its header line (it holds the pass's duration)."""
    return printed.split("\n", 1)[1] if printed.startswith("# graph ") and "\n" in printed else printed


# -- reading (used by the reader) -------------------------------------------------------------

_STORES_LOCK = threading.Lock()


def is_packed(rec) -> bool:
    """Return True when the recording ``rec`` was packed into a group store."""
    cached = getattr(rec, "_packed_cache", None)
    if cached is None:
        rows = rec._rows("SELECT value FROM meta WHERE key=?", (PACKED_KEY,))
        cached = bool(rows and rows[0][0] == STORE_NAME)
        rec._packed_cache = cached
    return cached


def store_path(rec) -> str:
    """Return where the group store of ``rec`` is expected: next to the rank file."""
    return os.path.join(os.path.dirname(os.path.abspath(rec.path)), STORE_NAME)


def _store_conn(rec) -> Optional[sqlite3.Connection]:
    path = store_path(rec)
    with _STORES_LOCK:
        conns = getattr(rec, "_store_conns", None)
        if conns is None:
            conns = rec._store_conns = {}
        key = threading.get_ident()
        if key in conns:
            return conns[key]
        if not os.path.exists(path):
            return None
        try:
            conn = sqlite3.connect("file:" + quote(path) + "?mode=ro&immutable=1", uri=True,
                                   check_same_thread=False)
            if conn.execute("PRAGMA application_id").fetchone()[0] != STORE_APPLICATION_ID:
                conn.close()
                return None
        except sqlite3.Error:
            return None
        conns[key] = conn
        return conn


def blob(rec, fp: str, what: str) -> str:
    """Return the text with fingerprint ``fp`` from the group store of ``rec``; RecordingError
    (one sentence naming ``what``, the store and the fingerprint) when it cannot be had."""
    from .reader import RecordingError
    conn = _store_conn(rec)
    where = f"{STORE_NAME} next to {os.path.basename(rec.path)}"
    if conn is None:
        raise RecordingError(
            f"the {what} of {os.path.basename(rec.path)} is kept once for its whole group in {where} "
            f"(sha256 {fp[:16]}), which is missing or not a group store: copy the whole group folder, "
            "not one rank file.")
    try:
        row = conn.execute("SELECT data FROM blobs WHERE fp=?", (fp,)).fetchone()
    except sqlite3.Error as e:
        raise RecordingError(f"{where} is corrupted (SQLite: {e}).") from None
    if row is None:
        raise RecordingError(f"the {what} (sha256 {fp[:16]}) is not in {where}: the store belongs to "
                             "another group or is incomplete.")
    try:
        text = zlib.decompress(row[0]).decode("utf-8", "surrogatepass")
    except (zlib.error, UnicodeDecodeError):
        raise RecordingError(f"{where} is corrupted (the {what} does not decompress).") from None
    if fingerprint(text) != fp:
        raise RecordingError(f"{where} is corrupted (the {what} does not match its fingerprint).")
    return text


def resolve_text(rec, text: Optional[str], what: str) -> Optional[str]:
    """Return ``text`` itself, or the stored text it refers to when ``rec`` is packed."""
    fp = _ref_fp(text)
    if fp is None or not is_packed(rec):
        return text
    return blob(rec, fp, what)


def resolve_pass(rec, trace_json: Optional[str], printed: Optional[str], meta: Optional[str],
                 where: str) -> tuple[Optional[str], Optional[str]]:
    """Return a pass's (trace JSON, printed text) with references resolved and the rank's own
    meta put back (the header line of the printed text is rebuilt by the reader)."""
    fp_j, fp_p = _ref_fp(trace_json), _ref_fp(printed)
    if (fp_j is None and fp_p is None) or not is_packed(rec):
        return trace_json, printed
    if fp_j is not None:
        trace_json = _with_meta(blob(rec, fp_j, f"trace of {where}"), meta, _parse_ref(trace_json)[1])
    if fp_p is not None:
        printed = "# graph (header rebuilt by the reader)\n" + blob(rec, fp_p, f"printed trace of {where}")
    return trace_json, printed


def close_store(rec) -> None:
    """Close the store connections ``rec`` opened."""
    with _STORES_LOCK:
        conns = getattr(rec, "_store_conns", None) or {}
        rec._store_conns = {}
    for c in conns.values():
        try:
            c.close()
        except sqlite3.Error:
            pass


def trace_hashes(rec) -> list[tuple]:
    """Return (graph, chain, index, pass name, fingerprint of its canonical trace JSON) for every
    pass of ``rec``, packed or not: equal lists mean identical traces."""
    packed = is_packed(rec)
    out, held = [], {}
    rows = rec._rows("SELECT graph_id, chain, idx, name, symbols_from, trace_json FROM passes"
                     " ORDER BY graph_id, chain, idx")
    for g, c, i, name, src, tj in rows:
        fp = None
        if tj is not None:
            fp = _ref_fp(tj) if packed else None
            if fp is None:
                try:
                    fp = fingerprint(canonical_trace_json(tj))
                except ValueError:
                    fp = "damaged"
            held[(g, c, i)] = fp
        else:
            fp = held.get((g, c, src), "missing")
        out.append((g, c, i, name, fp))
    return out


def missing_blobs(rec, cache: Optional[dict] = None) -> list[str]:
    """Return what a packed rank file refers to but cannot find (empty when complete): one line
    per missing kind, e.g. ``traces.tvstore (42 texts)``. ``cache`` (shared by the ranks of one
    group) keeps the store's fingerprints once read."""
    if not is_packed(rec):
        return []
    fps = set()
    for (tj, pr) in rec._rows("SELECT trace_json, printed FROM passes"):
        fps.update(f for f in (_ref_fp(tj), _ref_fp(pr)) if f)
    for (code, tj) in rec._rows("SELECT code, trace_json FROM kernels"):
        fps.update(f for f in (_ref_fp(code), _ref_fp(tj)) if f)
    if rec._has_table("sources"):
        fps.update(f for (t,) in rec._rows("SELECT text FROM sources") if (f := _ref_fp(t)))
    if not fps:
        return []
    key = ("store fingerprints", store_path(rec))
    have = cache.get(key) if cache is not None else None
    if have is None:
        conn = _store_conn(rec)
        if conn is None:
            return [f"{STORE_NAME} ({len(fps)} texts: traces, kernel code, sources)"]
        try:
            have = {r[0] for r in conn.execute("SELECT fp FROM blobs")}
        except sqlite3.Error:
            return [f"{STORE_NAME} (unreadable)"]
        if cache is not None:
            cache[key] = have
    lost = len(fps - have)
    return [f"{STORE_NAME} lacks {lost} of {len(fps)} texts"] if lost else []


# -- packing ----------------------------------------------------------------------------------

def open_store(path: str) -> sqlite3.Connection:
    """Open (creating it when needed) the group store at ``path`` for writing."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {STORE_APPLICATION_ID}")
    conn.executescript(_STORE_TABLES)
    return conn


def _put(store: sqlite3.Connection, text: str, seen: set, seq_offset: int = 0) -> str:
    fp = fingerprint(text)
    if fp not in seen:
        raw = text.encode("utf-8", "surrogatepass")
        store.execute("INSERT OR IGNORE INTO blobs(fp, size, data) VALUES (?,?,?)",
                      (fp, len(raw), zlib.compress(raw, 6)))
        seen.add(fp)
    return _ref(fp, seq_offset)


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
        for g, c, i, tj, pr in conn.execute(
                "SELECT graph_id, chain, idx, trace_json, printed FROM passes").fetchall():
            if tj is None and pr is None:
                continue
            new_tj = None
            if tj is not None:
                canonical, offset = canonical_trace(tj)
                new_tj = _put(store, canonical, seen, offset)
            new_pr = _put(store, _printed_body(pr), seen) if pr is not None else None
            conn.execute("UPDATE passes SET trace_json=?, printed=? WHERE graph_id=? AND chain=? AND idx=?",
                         (new_tj, new_pr, g, c, i))
        for kid, code, tj in conn.execute("SELECT id, code, trace_json FROM kernels").fetchall():
            conn.execute("UPDATE kernels SET code=?, trace_json=? WHERE id=?",
                         (_put(store, code, seen) if code else code, _put(store, tj, seen) if tj else tj, kid))
        # The kernel record duplicates code and region IR: keep only its other fields.
        for kid, record in conn.execute("SELECT id, record FROM kernels").fetchall():
            try:
                d = json.loads(record)
            except ValueError:
                continue
            if isinstance(d, dict):
                for k in ("code", "region", "trace_json"):
                    d.pop(k, None)
                conn.execute("UPDATE kernels SET record=? WHERE id=?", (json.dumps(d), kid))
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='sources'").fetchone():
            for f, text in conn.execute("SELECT file, text FROM sources").fetchall():
                if text:
                    conn.execute("UPDATE sources SET text=? WHERE file=?", (_put(store, text, seen), f))
        conn.execute("DELETE FROM symbols")  # an index over the trace JSON: the reader derives it
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
    conn.execute("PRAGMA journal_mode=DELETE")
    for idx in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL").fetchall():
        conn.execute(f'DROP INDEX IF EXISTS "{idx[0]}"')  # lookup indexes of the symbol rows, now empty
    conn.execute("PRAGMA page_size=1024")
    conn.execute("VACUUM")
    conn.close()
    return True


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
    store = open_store(os.path.join(group_dir, STORE_NAME))
    seen: set = set()
    packed = left = 0
    try:
        for _, p in files:
            try:
                ok = pack_rank(p, store, seen)
            except (sqlite3.Error, ValueError, OSError):
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
