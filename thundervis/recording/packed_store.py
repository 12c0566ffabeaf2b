"""The packed group file store: a rank recording whose heavy texts live once per group, in the
group folder's ``traces.tvstore``, behind the store protocol.

:func:`~.group_store.pack_group` (group code, above the reader) moves each pass's trace JSON and
printed trace, each kernel's code and region IR and each recorded source file of a finished rank
recording into ``traces.tvstore`` (SQLite, one zlib-compressed row per distinct text, keyed by the
SHA-256 of the text) and leaves a reference (``@tvstore:sha256:<hex>[~<seq_nr offset>]``) in its
place. :class:`PackedStore` reads such a file: :meth:`PackedStore.text` resolves a reference, checks
the blob against its fingerprint and expands it under the size cap; the store file itself is
refused when it is not a regular file or its schema holds views, triggers or virtual tables.
References are honoured only in files whose ``meta`` says they were packed. Sent alone, a packed
file opens and says which texts are missing when one is asked for.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from typing import Optional
from urllib.parse import quote

from .errors import RecordingError
from .schema_check import allowed_tables, check_schema
from .file_store import FileStore, _budgeted, _sqlite_sentence, connect, prepare_connection, refuse_schema_objects
from .typed import MAX_DECOMPRESSED, decompress, regular_file

STORE_NAME = "traces.tvstore"
STORE_APPLICATION_ID = 0x54565354  # "TVST"
STORE_TABLES = """
CREATE TABLE IF NOT EXISTS blobs (
    fp   TEXT PRIMARY KEY,        -- sha256 hex of the uncompressed UTF-8 text
    size INTEGER NOT NULL,        -- uncompressed bytes
    data BLOB NOT NULL            -- zlib-compressed UTF-8 text
);
"""
REF_PREFIX = "@tvstore:sha256:"
PACKED_KEY = "packed_into"


def fingerprint(text: str) -> str:
    """Return the SHA-256 hex of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def make_ref(fp: str, seq_offset: int = 0) -> str:
    """Return the reference to the stored text with fingerprint ``fp``."""
    return REF_PREFIX + fp + (f"~{seq_offset}" if seq_offset else "")


def parse_ref(text) -> Optional[tuple[str, int]]:
    """Return (fingerprint, seq_nr offset) a reference names, or None when ``text`` is not one."""
    if not (isinstance(text, str) and text.startswith(REF_PREFIX)):
        return None
    body = text[len(REF_PREFIX):]
    fp, _, offset = body.partition("~")
    if len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp):
        return None
    if offset and not (offset.lstrip("-").isdigit() and len(offset) <= 18):
        return None
    return fp, int(offset or 0)


def ref_fp(text) -> Optional[str]:
    """Return the fingerprint a reference names, or None when ``text`` is not a reference."""
    parsed = parse_ref(text)
    return parsed[0] if parsed else None


def walk_symbols(symbols):
    """Yield every symbol dict of a trace's JSON ``symbols`` list, subsymbols included (iterative)."""
    stack = list(reversed(symbols)) if isinstance(symbols, list) else []
    while stack:
        b = stack.pop()
        if isinstance(b, dict):
            yield b
            subs = b.get("subsymbols")
            if isinstance(subs, list):
                stack.extend(reversed(subs))


def with_meta(canonical: str, meta_text: Optional[str], seq_offset: int = 0) -> str:
    """Return a canonical trace JSON with the rank's own ``meta`` and ``seq_nr`` offset put back."""
    d = json.loads(canonical)
    try:
        meta = json.loads(meta_text) if meta_text else {}
    except ValueError:
        meta = {}
    d["meta"] = {k: v for k, v in (meta if isinstance(meta, dict) else {}).items()
                 if isinstance(v, (int, float, str, bool))}
    if seq_offset:
        for b in walk_symbols(d.get("symbols")):
            if isinstance(b.get("seq_nr"), int):
                b["seq_nr"] += seq_offset
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


class PackedStore(FileStore):
    """A rank recording packed into its group's ``traces.tvstore`` (see the module docstring)."""

    kind = "packed"

    def __init__(self, path: str, uri: str, schema_version: int, conn: sqlite3.Connection):
        super().__init__(path, uri, schema_version, conn)
        self._store_conns: dict[int, sqlite3.Connection] = {}
        self._store_lock = threading.Lock()

    @property
    def store_path(self) -> str:
        """Where the group store is expected: next to the rank file."""
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), STORE_NAME)

    def is_reference(self, value) -> bool:
        """True when ``value`` names a text kept in the group store."""
        return parse_ref(value) is not None

    def _store(self) -> Optional[sqlite3.Connection]:
        key = threading.get_ident()
        with self._store_lock:
            if key in self._store_conns:
                return self._store_conns[key]
            path = self.store_path
            if not os.path.lexists(path):
                return None
            regular_file(path, "group store")
            try:
                conn = connect("file:" + quote(path) + "?mode=ro&immutable=1")
                prepare_connection(conn)
                if conn.execute("PRAGMA application_id").fetchone()[0] != STORE_APPLICATION_ID:
                    conn.close()
                    return None
                refuse_schema_objects(conn, path)
                check_schema(conn, path, allowed_tables(STORE_TABLES), "group store")
            except sqlite3.Error:
                return None
            self._store_conns[key] = conn
            return conn

    def blob(self, fp: str, what: str) -> str:
        """Return the text with fingerprint ``fp`` from the group store; RecordingError (one
        sentence naming ``what``, the store and the fingerprint) when it cannot be had."""
        where = f"{STORE_NAME} next to {os.path.basename(self.path)}"
        conn = self._store()
        if conn is None:
            raise RecordingError(
                f"the {what} of {os.path.basename(self.path)} is kept once for its whole group in {where} "
                f"(sha256 {fp[:16]}), which is missing or not a group store: copy the whole group folder, "
                "not one rank file.")
        try:
            row = _budgeted(conn, lambda: conn.execute("SELECT data, size FROM blobs WHERE fp=?", (fp,)).fetchone())
        except sqlite3.Error as e:
            raise RecordingError(_sqlite_sentence(where, e)) from None
        if row is None:
            raise RecordingError(f"the {what} (sha256 {fp[:16]}) is not in {where}: the store belongs to "
                                 "another group or is incomplete.")
        try:
            # At most the size the store states (the fingerprint check below catches a wrong one):
            # a 1 MB bomb is refused after its stated size, not after MAX_DECOMPRESSED.
            size = row[1]
            cap = size if size.__class__ is int and 0 <= size <= MAX_DECOMPRESSED else None
            text = decompress(row[0], f"the {what}", where, cap).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise RecordingError(f"{where} is corrupted (the {what} is not UTF-8 text).") from None
        if fingerprint(text) != fp:
            raise RecordingError(f"{where} is corrupted (the {what} does not match its fingerprint).")
        return text

    def text(self, value, what: str) -> Optional[str]:
        """Return the text a text column holds, resolving a reference into the group store."""
        fp = ref_fp(value)
        if fp is None:
            return super().text(value, what)
        return self.blob(fp, what)

    def pass_texts(self, trace_json, printed, meta: Optional[str], what: str) -> tuple[Optional[str], Optional[str]]:
        """Return a pass's (trace JSON, printed text) with references resolved and the rank's own
        meta and ``seq_nr`` offset put back (the reader rebuilds the printed header line)."""
        ref_j, ref_p = parse_ref(trace_json), parse_ref(printed)
        if ref_j is not None:
            trace_json = with_meta(self.blob(ref_j[0], f"trace of {what}"), meta, ref_j[1])
        else:
            trace_json = super().text(trace_json, f"the trace of {what}")
        if ref_p is not None:
            printed = "# graph (header rebuilt by the reader)\n" + self.blob(ref_p[0], f"printed trace of {what}")
        else:
            printed = super().text(printed, f"the printed trace of {what}")
        return trace_json, printed

    def stored_fingerprints(self) -> Optional[set]:
        """Return the fingerprints the group store holds (None: no readable store)."""
        conn = self._store()
        if conn is None:
            return None
        try:
            return {r[0] for r in _budgeted(conn, lambda: conn.execute("SELECT fp FROM blobs").fetchall())}
        except sqlite3.Error:
            return None

    def close(self) -> None:
        """Close the file and the group store connections."""
        super().close()
        with self._store_lock:
            conns, self._store_conns = list(self._store_conns.values()), {}
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
