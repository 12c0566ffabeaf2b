"""The store protocol: what the reader needs from a recording's storage, and :func:`open_store`.

Three implementations: :class:`~.file_store.FileStore` (a plain ``.tvrec`` file),
:class:`~.packed_store.PackedStore` (a rank recording of a group whose texts live once in the
group's ``traces.tvstore``) and :class:`~.rank_store.RankStore` (a ``.tvrank``: one rank laid over
its variant's recording). :class:`~.reader.Recording` holds one and runs every query through it.

**Reading a table from a new module.** A module that reads its own table (say ``kernel_builds``)
takes the :class:`~.reader.Recording` and calls ``rec.store.rows(sql, params)``, the one query
entry point; it treats a missing table as empty (``rec.store.has_table(name)``: older recordings
lack it), checks every value with :mod:`.typed` where it reads it (``typed.row_checker`` for
columns, ``typed.load_json`` for JSON, ``rec.store.text(value, what)`` for text that may be stored
compressed) and wraps several queries in ``with rec.store.snapshot():`` to see one state of a live
file. Everything it raises for a bad value is :class:`~.errors.RecordingError` (one sentence).
"""
from __future__ import annotations

import contextlib
import sqlite3
from typing import ContextManager, Optional, Protocol

from .errors import RecordingError
from .file_store import FileStore, _budgeted, _sqlite_sentence
from .packed_store import PACKED_KEY, STORE_NAME, PackedStore
from .rank_store import RankStore, is_rank_file
from .typed import regular_file


class Store(Protocol):
    """What a recording's storage offers the reader. Values from ``rows`` are as stored (check
    them with :mod:`.typed`); every error is a :class:`~.errors.RecordingError`."""

    path: str              # the file the user named
    schema_version: int    # PRAGMA user_version of the recording
    immutable: bool        # opened with SQLite's immutable=1 (nothing can change it)
    kind: str              # "file", "packed" or "rank"

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one read query (under the time budget) and return its rows."""

    def snapshot(self) -> ContextManager:
        """Make the reads of the ``with`` body see one consistent state of the file (nests)."""

    def has_table(self, name: str) -> bool:
        """True when the recording has table ``name`` (newer tables are missing in older files)."""

    def data_version(self) -> int:
        """A number that changes when another process commits to the file."""

    def text(self, value, what: str) -> Optional[str]:
        """The text a text column holds (plain, compressed or kept in the group store)."""

    def pass_texts(self, trace_json, printed, meta: Optional[str], what: str) -> tuple:
        """A pass's (trace JSON, printed text) as texts."""

    def is_reference(self, value) -> bool:
        """True when ``value`` names text kept outside the file (a packed group's store)."""

    def close(self) -> None:
        """Close every connection."""


def open_store(path: str, check: bool = True) -> Store:
    """Open the recording at ``path`` (absolute) read-only with the store that fits it: a
    ``.tvrank`` as a :class:`RankStore`, a packed rank recording as a :class:`PackedStore`, any
    other recording as a :class:`FileStore`. Anything that is not a regular file is refused before
    it is opened; anything unreadable raises :class:`RecordingError` (one sentence)."""
    regular_file(path)
    if is_rank_file(path):
        return RankStore.open(path, check)
    uri, version, conn = FileStore._open_checked(path, check)
    try:
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        row = _budgeted(conn, lambda: conn.execute("SELECT value FROM meta WHERE key=?", (PACKED_KEY,)).fetchone()
                        ) if has_meta else None
    except sqlite3.Error as e:
        conn.close()
        raise RecordingError(_sqlite_sentence(path, e)) from None
    cls = PackedStore if row is not None and row[0] == STORE_NAME else FileStore
    return cls(path, uri, version, conn)


@contextlib.contextmanager
def opened_store(path: str, check: bool = True):
    """Context manager form of :func:`open_store`."""
    store = open_store(path, check)
    try:
        yield store
    finally:
        store.close()
