"""The plain file store: one ``.tvrec`` SQLite file opened read-only, behind the store protocol.

:meth:`FileStore.open` refuses, with one sentence in a :class:`~.errors.RecordingError`, a path that
is not a regular file (checked before anything opens it: a FIFO would block), does not exist, is not
a thundervis recording, is truncated or corrupted, was written with a newer schema, or whose schema
holds views, triggers or virtual tables (a plain recording has tables and indexes only) or anything
outside the schema this version writes (schema_check.py: generated columns, unknown tables or
columns, expression indexes), checked on what the connection reads, ``-wal`` included. Every
connection runs with ``PRAGMA trusted_schema=OFF`` and a query time budget (a progress handler), so
no file can make a query spin. The file is opened read-only (SQLite's ``immutable`` mode where
nothing can change it or the directory is not writable), so no ``-wal``/``-shm`` files are left
next to a recording that was only read. Each thread gets its own connection.

Stored text is handed out through :meth:`FileStore.text`: a text column holds plain text, or a
zlib-compressed UTF-8 blob (schema 3, see schema.py), expanded under a size cap.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import threading
import time
from typing import Optional
from urllib.parse import quote

from .errors import RecordingError
from .schema import APPLICATION_ID, SCHEMA_VERSION
from .schema_check import check_schema, recording_tables
from .typed import decompress, describe, regular_file

SQLITE_MAGIC = b"SQLite format 3\x00"
# A query of a recording finishes in well under this; one that runs longer is refused (a file
# built to spin: a recursive view, a huge cross join).
QUERY_BUDGET_S = 8.0
_PROGRESS_STEPS = 50_000  # SQLite VM steps between two looks at the clock
QUICK_CHECK_BYTES = 64 << 20


def check_header(path: str) -> bytes:
    """Return the first 100 bytes of ``path``; raise :class:`RecordingError` unless it is a regular
    file that starts like a complete SQLite database."""
    st = regular_file(path)
    size = st.st_size
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise RecordingError(f"{path} cannot be read ({e.strerror}).") from None
    if len(head) < 100:
        if head and SQLITE_MAGIC.startswith(head[:16]):
            raise RecordingError(f"{path} is truncated ({size} bytes): not a complete recording.")
        raise RecordingError(f"{path} is not a thundervis recording.")
    if not head.startswith(SQLITE_MAGIC):
        raise RecordingError(f"{path} is not a thundervis recording (not an SQLite database).")
    page_size = struct.unpack(">H", head[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", head[24:32])
    valid_for = struct.unpack(">I", head[92:96])[0]
    if page_size < 512 or page_size & (page_size - 1):
        raise RecordingError(f"{path} is corrupted (bad page size in the header).")
    if size % page_size or (valid_for == change_counter and n_pages and size < n_pages * page_size):
        raise RecordingError(f"{path} is truncated ({size} bytes, the header says "
                             f"{n_pages * page_size}): the recording is damaged.")
    return head


def read_uri(path: str, head: bytes) -> str:
    """Return the SQLite URI to read ``path`` without writing anything next to it.

    A file in rollback-journal mode (a finished recording) is opened ``mode=ro``: readers create no
    files. A file in WAL mode (header bytes 18/19 = 2) needs a ``-shm`` file to be read ``mode=ro``;
    when no ``-wal`` exists (everything is in the main file: an older finished recording) or the
    directory is not writable, it is opened ``immutable=1`` instead (no locks, no sidecars). A live
    or killed run keeps its ``-wal``; that one is read ``mode=ro`` to see what is committed there."""
    base = "file:" + quote(path)
    wal_mode = head[18] == 2 or head[19] == 2
    if not wal_mode:
        return base + "?mode=ro"
    folder = os.path.dirname(path) or "."
    if not os.path.exists(path + "-wal") or not os.access(folder, os.W_OK):
        return base + "?mode=ro&immutable=1"
    return base + "?mode=ro"


def connect(uri: str) -> sqlite3.Connection:
    """Open a read connection on ``uri`` (autocommit: reads take snapshots in explicit BEGINs)."""
    # check_same_thread=False only so close() may close every thread's connection; each connection
    # is used by the thread that opened it.
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, factory=_Connection)


class _Connection(sqlite3.Connection):
    """A read connection that carries its query budget (see :func:`prepare_connection`)."""

    budget: Optional[list] = None


def refuse_schema_objects(conn: sqlite3.Connection, path: str) -> None:
    """Raise :class:`RecordingError` when the main schema of ``conn`` holds a view, a trigger or a
    virtual table: a plain recording (or group store) has tables and indexes only, and those
    objects run SQL the file chose on every read."""
    row = conn.execute("SELECT type, name FROM main.sqlite_master WHERE type IN ('view', 'trigger')"
                       " OR (type = 'table' AND upper(substr(ltrim(sql), 1, 20)) = 'CREATE VIRTUAL TABLE')"
                       " LIMIT 1").fetchone()
    if row is not None:
        kind = "virtual table" if row[0] == "table" else row[0]
        raise RecordingError(f"{path} is refused: its schema holds a {kind} ({describe(row[1])}), "
                             "which a thundervis recording never has.")


class FileStore:
    """A recording file open for reading (see the module docstring); the plain implementation of
    the store protocol (:class:`~.store.Store`)."""

    kind = "file"

    def __init__(self, path: str, uri: str, schema_version: int, conn: sqlite3.Connection):
        self.path = path
        self.schema_version = schema_version
        self.immutable = "immutable=1" in uri
        self.uri = uri
        self._local = threading.local()
        self._local.conn = conn
        self._local.depth = 0
        self._conns = [conn]
        self._lock = threading.Lock()  # guards _conns and the polling connection
        self._poll: Optional[sqlite3.Connection] = None
        self._closed = False
        self._tables: Optional[frozenset] = None

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str, check: bool = True) -> "FileStore":
        """Open the recording file at ``path`` (absolute) read-only and validate it (with ``check``
        the whole file is verified with SQLite's ``quick_check``)."""
        uri, version, conn = cls._open_checked(path, check)
        return cls(path, uri, version, conn)

    @classmethod
    def _open_checked(cls, path: str, check: bool) -> tuple[str, int, sqlite3.Connection]:
        head = check_header(path)
        uri = read_uri(path, head)
        try:
            conn = connect(uri)
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.Error as e:
            try:  # no -shm can be made here (read-only directory or file): read the main file only
                uri = "file:" + quote(path) + "?mode=ro&immutable=1"
                conn = connect(uri)
                conn.execute("PRAGMA schema_version").fetchone()
            except sqlite3.Error:
                raise RecordingError(f"{path} cannot be opened ({e}).") from None
        try:
            prepare_connection(conn)
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id != APPLICATION_ID:
                raise RecordingError(f"{path} is an SQLite database but not a thundervis recording.")
            if version > SCHEMA_VERSION:
                raise RecordingError(f"{path} was written by a newer thundervis (recording schema {version}; "
                                     f"this version reads up to {SCHEMA_VERSION}): upgrade thundervis to read it.")
            if version < 1:
                raise RecordingError(f"{path} is not a thundervis recording (no schema version).")
            refuse_schema_objects(conn, path)
            check_schema(conn, path, recording_tables())
            # quick_check reads every page: past QUICK_CHECK_BYTES it would cost more than the
            # command (3 M event rows: 2 s of 2); SQLite still refuses each damaged page it reads
            if check and os.path.getsize(path) <= QUICK_CHECK_BYTES:
                result = _budgeted(conn, lambda: conn.execute("PRAGMA quick_check").fetchone()[0])
                if result != "ok":
                    raise RecordingError(f"{path} is corrupted (SQLite integrity check: {result}).")
            if _budgeted(conn, lambda: conn.execute("SELECT COUNT(*) FROM run").fetchone()[0]) != 1:
                raise RecordingError(f"{path} is incomplete: it holds no run (it was killed while being created).")
        except RecordingError:
            conn.close()
            raise
        except sqlite3.Error as e:
            conn.close()
            raise RecordingError(_sqlite_sentence(path, e)) from None
        return uri, version, conn

    # -- connections ----------------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        """Return this thread's connection (opened on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RecordingError(f"{self.path} is closed.")
            try:
                conn = connect(self.uri)
                prepare_connection(conn)
                # a live file's -wal may have changed since it was opened: check what this one reads
                refuse_schema_objects(conn, self.path)
                check_schema(conn, self.path, recording_tables())
                self.prepare(conn)
            except sqlite3.Error as e:
                raise RecordingError(f"{self.path} cannot be opened ({e}).") from None
            with self._lock:
                self._conns.append(conn)
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def prepare(self, conn: sqlite3.Connection) -> None:
        """Set up a new connection before its first read (a rank store lays its part over its
        variant's recording here)."""

    def close(self) -> None:
        """Close the file (every thread's connection)."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
            if self._poll is not None:
                conns.append(self._poll)
                self._poll = None
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    @contextlib.contextmanager
    def snapshot(self):
        """Run the ``with`` body's reads on one consistent snapshot of the file (a live run's later
        commits are not seen halfway through); nests."""
        conn = self.connection()
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as e:
                raise RecordingError(_sqlite_sentence(self.path, e)) from None
        self._local.depth = depth + 1
        try:
            yield self
        finally:
            self._local.depth = depth
            if depth == 0:
                try:
                    conn.execute("COMMIT")  # ends the read; an open one would pin the snapshot
                except sqlite3.Error:
                    pass

    # -- the query entry point ------------------------------------------------------------------

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one read query and return its rows: the one query entry point of a store. SQLite
        errors, and a query running past the time budget, raise :class:`RecordingError`. Values
        are as stored: check their types with :mod:`.typed` where you read them."""
        conn = self.connection()
        try:
            return _budgeted(conn, lambda: conn.execute(sql, params).fetchall())
        except sqlite3.Error as e:
            raise RecordingError(_sqlite_sentence(self.path, e)) from None

    def has_table(self, name: str) -> bool:
        """Return True when the file (or the overlay) has table ``name`` (tables added by later
        versions are missing from older recordings: treat a missing one as empty)."""
        if self._tables is None:
            self._tables = frozenset(r[0] for r in self.rows(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') UNION ALL"
                " SELECT name FROM sqlite_temp_master WHERE type IN ('table', 'view')"))
        return name in self._tables

    def data_version(self) -> int:
        """Return SQLite's ``PRAGMA data_version`` on a dedicated connection: it changes when
        another process commits to the file."""
        with self._lock:
            if self._closed:
                raise RecordingError(f"{self.path} is closed.")
            try:
                if self._poll is None:
                    self._poll = connect(self.uri)
                    prepare_connection(self._poll)
                version = self._poll.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as e:
                raise RecordingError(_sqlite_sentence(self.path, e)) from None
        return int(version)

    # -- stored text ----------------------------------------------------------------------------

    def text(self, value, what: str) -> Optional[str]:
        """Return the text a text column holds: plain text as is, a compressed blob expanded (under
        the size cap), NULL as None; :class:`RecordingError` naming ``what`` for anything else."""
        if value is None or value.__class__ is str:
            return value
        if isinstance(value, bytes):
            raw = decompress(value, what, self.path)
            try:
                return raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise RecordingError(f"{self.path} is corrupted ({what} is not UTF-8 text).") from None
        raise RecordingError(f"{self.path} is corrupted ({what} is {describe(value)} where text belongs).")

    def pass_texts(self, trace_json, printed, meta: Optional[str], what: str) -> tuple[Optional[str], Optional[str]]:
        """Return a pass's (trace JSON, printed text) as texts (a packed store also resolves them
        from its group's store and puts the rank's own meta back)."""
        return self.text(trace_json, f"the trace of {what}"), self.text(printed, f"the printed trace of {what}")

    def is_reference(self, value) -> bool:
        """True when ``value`` names text kept outside this file (never, in a plain file)."""
        return False


def prepare_connection(conn: sqlite3.Connection) -> None:
    """Make ``conn`` safe for an untrusted file: no SQL functions run from the schema
    (``trusted_schema=OFF``) and every query under the time budget (see :func:`_budgeted`)."""
    conn.execute("PRAGMA trusted_schema=OFF")
    state = [None]  # the deadline of the query running now (None: none)
    conn.set_progress_handler(lambda: 1 if state[0] is not None and time.monotonic() > state[0] else 0,
                              _PROGRESS_STEPS)
    if isinstance(conn, _Connection):
        conn.budget = state


def _budgeted(conn: sqlite3.Connection, fn):
    """Run ``fn`` (one query on ``conn``) under the time budget; :class:`_BudgetExceeded` past it."""
    state = getattr(conn, "budget", None)
    if state is None:
        return fn()
    old = state[0]
    if old is None:
        state[0] = time.monotonic() + QUERY_BUDGET_S
    try:
        return fn()
    except sqlite3.OperationalError as e:
        if "interrupt" in str(e) and state[0] is not None and time.monotonic() > state[0]:
            raise _BudgetExceeded() from None
        raise
    finally:
        state[0] = old


class _BudgetExceeded(sqlite3.Error):
    pass


def _sqlite_sentence(path: str, e: sqlite3.Error) -> str:
    if isinstance(e, _BudgetExceeded):
        return (f"{path} is refused: a query ran longer than {QUERY_BUDGET_S:g} s, which no plain "
                "recording needs.")
    return f"{path} is corrupted or truncated (SQLite: {e})."
