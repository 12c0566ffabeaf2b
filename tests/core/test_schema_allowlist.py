"""The schema allow-list (issue 41, item 4): a recording whose schema is not one this version
writes is refused in one sentence before any user table's row is read: generated columns (made with
ALTER TABLE, a ``writable_schema`` edit or a ``-wal`` beside a clean file), unknown tables and
columns, expression and partial indexes. Older recordings (fewer tables and columns) still open."""
from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time

import pytest

from thundervis.recording import RecordingError, open_recording
from thundervis.recording.schema_check import recording_tables

from core_helpers import run_cli

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from _synthetic_recording import write_recording  # noqa: E402

BOMB = "printf('%.*c', 900000000, 'x')"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("allowlist") / "base.tvrec")
    write_recording(path, n_symbols=20)
    return path


def _edited(base: str, tmp_path, *statements, writable: bool = False) -> str:
    path = str(tmp_path / "x.tvrec")
    shutil.copy(base, path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if writable:
            conn.execute("PRAGMA writable_schema=ON")
        for s in statements:
            conn.execute(s)
    finally:
        conn.close()
    return path


def _refused(path: str, capsys, *words: str) -> None:
    with pytest.raises(RecordingError) as e:
        open_recording(path)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    t = time.monotonic()
    code, out, err = run_cli(capsys, "ls", path)
    assert code == 2 and "Traceback" not in err and err.strip().count("\n") == 0, err
    assert time.monotonic() - t < 5


def test_the_allow_list_is_the_schema_this_version_writes():
    tables = recording_tables()
    assert {"run", "passes", "sources", "pass_symbols", "symbol_costs"} <= set(tables)
    assert "delta_base" in tables["passes"] and "process_start" in tables["run"]


def test_a_generated_column_added_with_alter_table_is_refused(base, tmp_path, capsys):
    path = _edited(base, tmp_path, f"ALTER TABLE run ADD COLUMN evil TEXT GENERATED ALWAYS AS ({BOMB}) VIRTUAL")
    _refused(path, capsys, "generated", "evil")


def test_a_generated_column_written_through_writable_schema_is_refused(base, tmp_path, capsys):
    path = _edited(base, tmp_path,
                   "UPDATE sqlite_master SET sql = replace(sql, 'traceback   TEXT,',"
                   f" 'traceback TEXT, evil TEXT GENERATED ALWAYS AS ({BOMB.replace(chr(39), chr(39) * 2)}) VIRTUAL,')"
                   " WHERE name = 'run'", writable=True)
    conn = sqlite3.connect(path)
    assert "GENERATED" in conn.execute("SELECT sql FROM sqlite_master WHERE name='run'").fetchone()[0]
    conn.close()
    _refused(path, capsys, "generated")


def test_a_generated_column_in_a_wal_beside_a_clean_file_is_refused(base, tmp_path, capsys):
    clean = str(tmp_path / "clean.tvrec")
    shutil.copy(base, clean)
    conn = sqlite3.connect(clean, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"ALTER TABLE passes ADD COLUMN evil TEXT GENERATED ALWAYS AS ({BOMB}) VIRTUAL")
    path = str(tmp_path / "x.tvrec")
    shutil.copy(clean, path)  # the main file still has the clean schema; the -wal holds the edit
    shutil.copy(clean + "-wal", path + "-wal")
    conn.close()
    main_only = sqlite3.connect("file:" + path + "?mode=ro&immutable=1", uri=True)
    assert "evil" not in main_only.execute("SELECT sql FROM sqlite_master WHERE name='passes'").fetchone()[0]
    main_only.close()
    _refused(path, capsys, "generated")


def test_an_unknown_table_and_an_unknown_column_are_refused(base, tmp_path, capsys):
    _refused(_edited(base, tmp_path, "CREATE TABLE extra (a)"), capsys, "unknown table", "extra")
    os.remove(str(tmp_path / "x.tvrec"))
    _refused(_edited(base, tmp_path, "ALTER TABLE events ADD COLUMN more TEXT"), capsys, "unknown column")


def test_a_changed_default_and_expression_or_partial_indexes_are_refused(base, tmp_path, capsys):
    _refused(_edited(base, tmp_path, "UPDATE sqlite_master SET sql = replace(sql, 'ended_at    REAL,',"
                     f" 'ended_at REAL DEFAULT ({BOMB.replace(chr(39), chr(39) * 2)}),') WHERE name = 'run'",
                     writable=True), capsys, "default")
    os.remove(str(tmp_path / "x.tvrec"))
    _refused(_edited(base, tmp_path, f"CREATE INDEX ix ON run ({BOMB})"), capsys, "expression")
    os.remove(str(tmp_path / "x.tvrec"))
    _refused(_edited(base, tmp_path, "CREATE INDEX ix ON run (id) WHERE length(cwd) > 0"), capsys, "partial")


def test_older_recordings_with_fewer_tables_and_columns_open(base, tmp_path, capsys):
    path = _edited(base, tmp_path, "DROP TABLE symbol_costs", "DROP TABLE kernel_builds",
                   "ALTER TABLE run DROP COLUMN host", "ALTER TABLE run DROP COLUMN process_start",
                   "CREATE INDEX plain ON passes (name)", "ANALYZE", "PRAGMA user_version = 1")
    with open_recording(path) as rec:
        assert rec.run().status
    code, out, err = run_cli(capsys, "ls", path)
    assert code == 0, err
