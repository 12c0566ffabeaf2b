"""The schema allow-list: a file is read only when its schema is one this version's writer makes.

``trusted_schema=OFF`` stops functions with side effects, but SQL the file chose still runs on every
read where the schema says so: a generated column (``GENERATED ALWAYS AS (printf('%.*c', 900000000,
'x')) VIRTUAL``, printf being harmless by SQLite's measure) allocates 900 MB on each row read; a
non-literal default fills in old rows; an expression or partial index computes. Such a schema is
made with ``writable_schema`` edits, ``ALTER TABLE``, or a ``-wal`` beside a clean file. So before
any row of a user table is read, :func:`check_schema` compares what SQLite parsed for the file
(``sqlite_master`` and ``table_xinfo``, on the very connection the reader uses, so the ``-wal`` it
reads is checked too) with the DDL this version writes, parsed the same way: every table known,
every column known, none generated, defaults as written, indexes on plain columns. Older
recordings (fewer tables, fewer columns) pass; the DDL is the one in schema.py, so a table a later
change adds there is allowed without touching this module.
"""
from __future__ import annotations

import functools
import hashlib
import sqlite3

from .errors import RecordingError
from .schema import INDEXES, TABLES
from .typed import describe


def _name(value) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…") if isinstance(value, str) else describe(value)

# SQLite's own tables: a sequence counter and planner statistics (ANALYZE); plain data, no SQL.
_INTERNAL_TABLES = frozenset(("sqlite_sequence", "sqlite_stat1", "sqlite_stat4"))
_PASSED: set = set()  # (sha256 of a schema's SQL, allow-list id) that passed the check


@functools.lru_cache(maxsize=None)
def allowed_tables(ddl: str) -> dict:
    """Return {table: {column: default as SQLite reports it}} for the tables ``ddl`` creates
    (parsed by SQLite itself, in memory, so no hand-kept copy of the schema exists)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(ddl)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: {r[0]: r[1] for r in conn.execute("SELECT name, dflt_value FROM pragma_table_xinfo(?)", (n,))}
                for n in names}
    finally:
        conn.close()


def recording_tables() -> dict:
    """Return the allow-list of a recording: the tables and indexes of schema.py."""
    return allowed_tables(TABLES + INDEXES)


def check_schema(conn: sqlite3.Connection, path: str, allowed: dict, what: str = "recording") -> None:
    """Raise :class:`RecordingError` (one sentence) unless every table, column and index of the
    main schema of ``conn`` is one ``allowed`` (see :func:`allowed_tables`) holds, no column is
    generated or hidden, every default is the written one, and every index is on plain columns.
    Reads only the schema, never a user table's row."""
    def refuse(why: str) -> None:
        raise RecordingError(f"{path} is refused: {why}, which a thundervis {what} never has "
                             "(its schema was edited).")

    # The verdict is a function of the schema's SQL text (SQLite parses nothing else): files with
    # a text already passed (every rank of a group) cost one query.
    text = conn.execute("SELECT group_concat(type || char(1) || name || char(1) || tbl_name || char(1) ||"
                        " coalesce(sql, ''), char(0)) FROM (SELECT * FROM main.sqlite_master ORDER BY rowid)"
                        ).fetchone()[0] or ""
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), id(allowed))
    if key in _PASSED:
        return
    # three queries whatever the number of tables: a group command opens thousands of files
    columns: dict = {}
    for table, col, default, hidden in conn.execute(
            "SELECT m.name, x.name, x.dflt_value, x.hidden FROM main.sqlite_master AS m,"
            " pragma_table_xinfo(m.name, 'main') AS x WHERE m.type = 'table'"):
        columns.setdefault(table, []).append((col, default, hidden))
    indexes = {name: (partial, expr) for name, partial, expr in conn.execute(
        "SELECT il.name, il.partial, (SELECT COUNT(*) FROM pragma_index_xinfo(il.name, 'main') AS xi"
        " WHERE xi.key AND xi.cid = -2) FROM main.sqlite_master AS m, pragma_index_list(m.name, 'main') AS il"
        " WHERE m.type = 'table'")}
    for kind, name, table in conn.execute("SELECT type, name, tbl_name FROM main.sqlite_master").fetchall():
        if kind == "table":
            if name in _INTERNAL_TABLES:
                continue
            if name not in allowed:
                refuse(f"it holds an unknown table {_name(name)}")
            known = allowed[name]
            for col, default, hidden in columns.get(name, ()):
                if hidden:
                    refuse(f"column {_name(col)} of table {name} is generated or hidden")
                if col not in known:
                    refuse(f"table {name} holds an unknown column {_name(col)}")
                if default != known[col]:
                    refuse(f"column {col} of table {name} has a default it was not written with")
        elif kind == "index":
            if table not in allowed:
                refuse(f"it holds an index on an unknown table {_name(table)}")
            partial, expr = indexes.get(name, (0, 0))
            if partial:
                refuse(f"index {_name(name)} is partial")
            if expr:
                refuse(f"index {_name(name)} is on an expression")
        else:  # views and triggers are refused before (refuse_schema_objects names them)
            refuse(f"it holds a {_name(kind)} named {_name(name)}")
    if len(_PASSED) < 1024:
        _PASSED.add(key)
