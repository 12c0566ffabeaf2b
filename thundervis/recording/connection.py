"""Opening a recording file read-only and holding its connections.

:func:`open_checked` refuses, with one sentence in a :class:`RecordingError`, a file that does not
exist, is not a thundervis recording, is truncated or corrupted, or was written with a newer schema.
The file is opened read-only (SQLite's ``immutable`` mode where nothing can change it or the
directory is not writable), so no ``-wal``/``-shm`` files are left next to a recording that was only
read. :class:`RecordingConnection` (the base of :class:`~.reader.Recording`) gives each thread its
own connection, runs reads on one snapshot, turns SQLite errors into :class:`RecordingError` and
polls the file's revision. :func:`_is_ref` recognises text packed into a group's trace store.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import struct
import threading
from typing import Optional
from urllib.parse import quote

from .model import Revision
from .schema import APPLICATION_ID, SCHEMA_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"


class RecordingError(Exception):
    """The file cannot be read as a recording; the message is one sentence for the user."""


def _check_header(path: str) -> bytes:
    """Return the first 100 bytes of ``path``; raise :class:`RecordingError` unless it starts like
    a complete SQLite database."""
    if not os.path.exists(path):
        raise RecordingError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise RecordingError(f"{path} is a directory, not a recording.")
    try:
        size = os.path.getsize(path)
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


def _uri(path: str, head: bytes) -> str:
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


def _connect(uri: str) -> sqlite3.Connection:
    # check_same_thread=False only so close() may close every thread's connection; each connection
    # is used by the thread that opened it. Autocommit: reads take snapshots in explicit BEGINs.
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)


def _is_ref(text) -> bool:
    """True when ``text`` is a reference into a group's trace store (see group_store)."""
    return isinstance(text, str) and text.startswith("@tvstore:")



def open_checked(path: str, check: bool = True) -> tuple[str, int, sqlite3.Connection]:
    """Open the recording file at ``path`` (absolute) read-only and validate it; return (URI,
    schema version, connection).

    With ``check`` the whole file is verified with SQLite's ``quick_check``. Raises
    :class:`RecordingError` (one sentence) for anything that is not a readable recording."""
    head = _check_header(path)
    uri = _uri(path, head)
    try:
        conn = _connect(uri)
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as e:
        try:  # no -shm can be made here (read-only directory or file): read the main file only
            uri = "file:" + quote(path) + "?mode=ro&immutable=1"
            conn = _connect(uri)
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.Error:
            raise RecordingError(f"{path} cannot be opened ({e}).") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise RecordingError(f"{path} is an SQLite database but not a thundervis recording.")
        if version > SCHEMA_VERSION:
            raise RecordingError(f"{path} was written by a newer thundervis (recording schema {version}; "
                                 f"this version reads up to {SCHEMA_VERSION}): upgrade thundervis to read it.")
        if version < 1:
            raise RecordingError(f"{path} is not a thundervis recording (no schema version).")
        if check:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            if result != "ok":
                raise RecordingError(f"{path} is corrupted (SQLite integrity check: {result}).")
        if conn.execute("SELECT COUNT(*) FROM run").fetchone()[0] != 1:
            raise RecordingError(f"{path} is incomplete: it holds no run (it was killed while being created).")
    except RecordingError:
        conn.close()
        raise
    except sqlite3.Error as e:
        conn.close()
        raise RecordingError(f"{path} is corrupted or truncated (SQLite: {e}).") from None
    return uri, version, conn


class RecordingConnection:
    """The connections of a recording open for reading: one SQLite connection per thread, read
    snapshots, row and JSON helpers that turn SQLite errors into :class:`RecordingError`, and the
    revision a viewer polls. :class:`~.reader.Recording` adds the queries."""

    def __init__(self, path: str, uri: str, schema_version: int, conn: sqlite3.Connection):
        self.path = path
        self.schema_version = schema_version
        self.immutable = "immutable=1" in uri
        self._uri = uri
        self._local = threading.local()
        self._local.conn = conn
        self._local.depth = 0
        self._conns = [conn]
        self._lock = threading.Lock()  # guards _conns, the caches and the polling connection
        self._poll: Optional[sqlite3.Connection] = None
        self._closed = False

    # -- connections ----------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RecordingError(f"{self.path} is closed.")
            try:
                conn = _connect(self._uri)
                self._prepare_connection(conn)
            except sqlite3.Error as e:
                raise RecordingError(f"{self.path} cannot be opened ({e}).") from None
            with self._lock:
                self._conns.append(conn)
            self._local.conn = conn
            self._local.depth = 0
        return conn

    def _prepare_connection(self, conn: sqlite3.Connection) -> None:
        """Set up a new connection before its first read (a rank file lays its part over its
        variant's recording here; see rank_file)."""

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
        if getattr(self, "_store_conns", None):
            from .group_store import close_store
            close_store(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def snapshot(self):
        """Run the ``with`` body's reads on one consistent snapshot of the file (a live run's later
        commits are not seen halfway through); nests."""
        conn = self._conn()
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as e:
                raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None
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

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def _has_table(self, name: str) -> bool:
        return bool(self._rows("SELECT 1 FROM sqlite_master WHERE type='table' AND name=? UNION ALL"
                               " SELECT 1 FROM sqlite_temp_master WHERE name=?", (name, name)))

    def _json(self, text: Optional[str], default=None):
        """Parse a stored JSON value; with a list or dict ``default`` it must be of that type."""
        if text is None:
            return default
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise RecordingError(f"{self.path} is corrupted (a stored JSON value does not parse).") from None
        if isinstance(default, (list, dict)) and not isinstance(value, type(default)):
            if value is None:
                return default
            raise RecordingError(f"{self.path} is corrupted (a stored JSON value has the wrong type).")
        return value

    # -- liveness -------------------------------------------------------------------------------

    def revision(self) -> Revision:
        """Return the file's :class:`Revision`: it changes when another process commits to the
        file (a live run writing, a rerun storing results) or the run's status changes. Cheap:
        poll it and reload what is shown when it differs."""
        with self._lock:
            if self._closed:
                raise RecordingError(f"{self.path} is closed.")
            try:
                if self._poll is None:
                    self._poll = _connect(self._uri)
                version = self._poll.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as e:
                raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None
        return Revision(int(version), self.run().status)
