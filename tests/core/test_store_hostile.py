"""Hostile recordings at the store's door (issue 22: F3, F4, F5, F7's blobs and world size).

Every reproduction is a file a careless colleague or an attacker could send: a column of the wrong
type, JSON nested 100,000 deep, a FIFO where a recording belongs, a schema with a view over a
recursive CTE, a compressed bomb, a world size of 1e12. Each must give one sentence and exit 2 (or
be harmless), quickly, never a traceback or a hang.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import threading
import time
import zlib

import pytest

from thundervis.recording import RecordingError, open_recording

from core_helpers import run_cli

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from _synthetic_group import write_group  # noqa: E402
from _synthetic_recording import write_recording  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("hostile_base")
    path = str(folder / "base.tvrec")

    def also(obs):
        obs.runtime(0, "forward", "timings", {
            "clock": "host", "device": "cpu", "calls": 2, "warmup": 1, "call_starts_us": [0.0, 10.0],
            "symbols": [{"uid": "f0", "name": "aten.add", "calls": 2, "median_us": 5.0, "min_us": 4.0,
                         "max_us": 6.0, "total_us": 10.0, "share": 0.5, "bytes_read": 8, "bytes_written": 8,
                         "gbps": 1.0, "index": 0, "samples_us": [4.0, 6.0], "starts_us": [0.0, 1.0]}],
            "step": {"median_us": 10.0, "min_us": 9.0, "max_us": 11.0, "total_us": 20.0}})
        obs.runtime(0, "forward", "walls", {"clock": "host", "device": "cpu", "calls": 2, "walls_us": [12.0, 14.0]})
    write_recording(path, n_symbols=40, also=also)
    return path


def _copy(base: str, tmp_path, name: str = "x.tvrec") -> str:
    out = str(tmp_path / name)
    shutil.copy(base, out)
    return out


def _sql(path: str, *statements, params=()) -> None:
    conn = sqlite3.connect(path)
    try:  # a refused statement must not leave the connection (and its lock on the file) open
        for s in statements:
            conn.execute(s, params) if params else conn.execute(s)
        conn.commit()
    finally:
        conn.close()


def _one_sentence(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _within(seconds: float, fn):
    """Run ``fn`` in a thread; fail (rather than hang the suite) when it takes over ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
    t = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"], time.monotonic() - start


# -- F3: column types -------------------------------------------------------------------------

@pytest.mark.parametrize("table, column, value, commands", [
    ("passes", "duration_ms", "x", [["ls"], ["ls", "--json"]]),
    ("passes", "idx", "x", [["ls"], ["show"]]),
    ("passes", "duration_ms", float("inf"), [["ls", "--json"]]),
    ("passes", "n_symbols", -5, [["ls", "--json"]]),
    ("run", "script", b"\x00\xffbin", [["ls", "--json"], ["ls"]]),
    ("run", "started_at", "yesterday", [["ls"]]),
    ("graphs", "compile_s", b"\x01", [["ls", "--json"]]),
    ("kernel_timings", "calls", "many", [["ls", "--json"]]),
])
def test_a_column_of_the_wrong_type_is_one_sentence(base, tmp_path, capsys, table, column, value, commands):
    path = _copy(base, tmp_path)
    _sql(path, f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT MIN(rowid) FROM {table})", params=(value,))
    for argv in commands:
        code, out, err = run_cli(capsys, *argv, path)
        _one_sentence(code, err)
        assert f"{table}.{column}" in err or "corrupted" in err


def test_an_event_of_the_wrong_type_is_one_sentence(base, tmp_path):
    path = _copy(base, tmp_path)
    _sql(path, "INSERT INTO events(event, data, at) VALUES ('note', ?, 1.0)", params=(b"\x00",))
    with open_recording(path) as rec:
        with pytest.raises(RecordingError, match="events.data"):
            rec.events()


def test_view_exits_2_on_a_column_of_the_wrong_type(base, tmp_path, capsys, monkeypatch):
    path = _copy(base, tmp_path)
    _sql(path, "UPDATE passes SET duration_ms = 'x'")

    class _TTY:
        def __init__(self, stream):
            self._s = stream

        def isatty(self):
            return True

        def __getattr__(self, name):
            return getattr(self._s, name)
    started = []
    import thundervis.tui.app as app_mod
    monkeypatch.setattr(app_mod.ThundervisApp, "run", lambda self, *a, **k: started.append(1))
    monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
    monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    code, out, err = run_cli(capsys, "view", path)
    _one_sentence(code, err)
    assert started == []  # refused before the UI starts


def test_view_exits_2_when_a_worker_finds_damage(base, tmp_path, capsys, monkeypatch):
    """Damage found while the UI runs (a worker reading a pass) ends the UI with one sentence and
    exit 2, not Textual's traceback screen and exit 0."""
    from thundervis import api
    from thundervis.tui.data import open_data
    import thundervis.tui.app as app_mod
    data = open_data(base)

    def run(self, *a, **k):  # what a failing worker does: hand the exception to the app
        from textual.worker import WorkerFailed
        self.exit = lambda *a, **k: None
        self._handle_exception(WorkerFailed(RecordingError(f"{base} is corrupted (passes.meta is not valid JSON).")))
    monkeypatch.setattr(app_mod.ThundervisApp, "run", run)
    with pytest.raises(RecordingError, match="passes.meta"):
        api.run_tui(data, 0)


# -- F4: JSON depth and types -------------------------------------------------------------------

@pytest.mark.parametrize("table, column", [("kernel_timings", "samples"), ("kernel_timings", "starts"),
                                           ("graph_timings", "call_starts"), ("graph_timings", "call_walls")])
def test_json_nested_100000_deep_is_one_sentence(base, tmp_path, capsys, table, column):
    path = _copy(base, tmp_path)
    _sql(path, f"UPDATE {table} SET {column} = ?", params=("[" * 100_000 + "]" * 100_000,))
    with open_recording(path) as rec:
        with pytest.raises(RecordingError, match="nested"):
            rec.timings()
    code, out, err = run_cli(capsys, "ls", "--json", path)
    _one_sentence(code, err)


def test_a_deep_json_column_is_refused_past_the_depth_limit(base, tmp_path):
    path = _copy(base, tmp_path)
    _sql(path, "INSERT INTO events(event, data, at) VALUES ('note', ?, 1.0)", params=("[" * 50 + "]" * 50,))
    with open_recording(path) as rec:
        with pytest.raises(RecordingError, match="deeper than"):
            rec.events()
    _sql(path, "DELETE FROM events", "UPDATE kernels SET members = '" + "[" * 50 + "]" * 50 + "'")
    with open_recording(path) as rec:
        with pytest.raises(RecordingError, match="deeper than"):
            rec.kernels()


def _rank_file(folder, doc_text: str, name: str = "rank-00001.tvrank") -> str:
    path = os.path.join(str(folder), name)
    with open(path, "wb") as f:
        f.write(b"TVRANK1\n" + zlib.compress(doc_text.encode()))
    return path


def test_a_rank_file_nested_200000_deep_is_one_sentence(tmp_path, capsys):
    path = _rank_file(tmp_path, "[" * 200_000 + "]" * 200_000)
    with pytest.raises(RecordingError):
        open_recording(path)
    code, out, err = run_cli(capsys, "ls", path)
    _one_sentence(code, err)


@pytest.mark.parametrize("version", ['"2"', "2.5", "[2]", "true"])
def test_a_rank_file_version_of_the_wrong_type_is_one_sentence(tmp_path, capsys, version):
    doc = ('{"format":"thundervis-rank","version":%s,"variant":"rank-00000.tvrec","run":{},"passes":[],'
           '"graphs":[],"tables":{}}' % version)
    path = _rank_file(tmp_path, doc)
    code, out, err = run_cli(capsys, "ls", path)
    _one_sentence(code, err)


@pytest.fixture(scope="module")
def group(tmp_path_factory) -> str:
    return write_group(str(tmp_path_factory.mktemp("hostile_group")), variants=(0, 0))


def _group_copy(group: str, tmp_path) -> str:
    out = str(tmp_path / "job.tvgroup")
    shutil.copytree(group, out)
    return out


@pytest.mark.parametrize("field, raw", [("torchrun_args", "5"), ("node_rank", "1e400"), ("node_rank", "NaN"),
                                        ("exit_code", "NaN"), ("target", '{"a": 1}'), ("failures", "7"),
                                        ("started_at", "1e400"), ("node_rank", "-3")])
def test_a_launch_file_of_the_wrong_type_is_one_sentence(group, tmp_path, capsys, field, raw):
    g = _group_copy(group, tmp_path)
    path = os.path.join(g, "launch-node0.json")
    doc = {"format": "thundervis-launch", "version": 1, "node_rank": 0, "torchrun_args": [], "target": [],
           "cwd": "/", "started_at": 1.0, "ended_at": 2.0, "status": "ok", "exit_code": 0, "failures": []}
    text = json.dumps(doc).replace(f'"{field}": {json.dumps(doc[field])}', f'"{field}": {raw}')
    assert raw in text
    with open(path, "w") as f:
        f.write(text)
    code, out, err = run_cli(capsys, "ls", g)
    _one_sentence(code, err)
    assert "launch-node0.json" in err


# -- F5: hangs ------------------------------------------------------------------------------------

def test_a_fifo_named_like_a_recording_is_refused_before_opening(tmp_path, capsys):
    fifo = str(tmp_path / "x.tvrec")
    os.mkfifo(fifo)
    for argv in (["ls", fifo], ["ls", "--json", fifo], ["show", fifo], ["view", fifo]):
        (code, out, err), took = _within(20, lambda: run_cli(capsys, *argv))
        _one_sentence(code, err)
        assert "FIFO" in err


def test_a_fifo_rank_file_in_a_group_does_not_hang(group, tmp_path, capsys):
    g = _group_copy(group, tmp_path)
    target = os.path.join(g, "rank-00001.tvrank")
    if os.path.exists(target):
        os.remove(target)
    for name in os.listdir(g):
        if name.startswith("rank-00001"):
            os.remove(os.path.join(g, name))
    os.mkfifo(target)
    (code, out, err), took = _within(20, lambda: run_cli(capsys, "ls", g))
    assert code in (0, 1, 2) and "Traceback" not in err
    assert "FIFO" in out + err
    from thundervis.recording.group import open_group
    (ov, took) = _within(20, lambda: open_group(g).overview())
    assert any(r.error and "FIFO" in r.error for r in ov.ranks)


def test_a_view_over_a_recursive_cte_is_refused(base, tmp_path, capsys):
    path = _copy(base, tmp_path)
    _sql(path, "ALTER TABLE passes RENAME TO passes_real",
         "CREATE VIEW passes AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
         " SELECT p.* FROM passes_real p, c")
    for argv in (["ls", path], ["show", path]):
        (code, out, err), took = _within(30, lambda: run_cli(capsys, *argv))
        _one_sentence(code, err)
        assert "view" in err
        assert took < 10


def test_a_trigger_is_refused(base, tmp_path):
    path = _copy(base, tmp_path)
    _sql(path, "CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM events; END")
    with pytest.raises(RecordingError, match="trigger"):
        open_recording(path)


def test_a_virtual_table_is_refused(base, tmp_path):
    path = _copy(base, tmp_path)
    conn = sqlite3.connect(path)
    for module in ("fts5", "rtree", "fts4"):
        try:
            conn.execute(f"CREATE VIRTUAL TABLE vt USING {module}(a, b, c)")
            break
        except sqlite3.OperationalError:
            continue
    else:
        pytest.skip("this SQLite has no virtual table module")
    conn.commit()
    conn.close()
    with pytest.raises(RecordingError, match="virtual table"):
        open_recording(path)


def test_queries_run_with_an_untrusted_schema_and_a_time_budget(base, monkeypatch):
    from thundervis.recording import file_store
    with open_recording(base) as rec:
        assert rec.store.rows("PRAGMA trusted_schema") == [(0,)]
        monkeypatch.setattr(file_store, "QUERY_BUDGET_S", 0.3)
        spin = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")
        with pytest.raises(RecordingError, match="longer than"):
            _within(20, lambda: rec.store.rows(spin))
        assert rec.run().status  # the connection still answers after a refused query


# -- F7: bounds --------------------------------------------------------------------------------------

def _bomb(size: int, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    c = zlib.compressobj(9)
    out = [c.compress(prefix)]
    chunk = b" " * (1 << 20)
    for _ in range(size >> 20):
        out.append(c.compress(chunk))
    out.append(c.compress(suffix))
    out.append(c.flush())
    return b"".join(out)


def test_a_rank_file_bomb_is_refused_before_it_expands(tmp_path):
    import tracemalloc
    doc_head = b'{"format":"thundervis-rank","version":1,"variant":"rank-00000.tvrec","run":{},"passes":[],' \
               b'"graphs":[],"tables":{},"pad":"'
    data = _bomb(200 << 20, doc_head, b'"}')
    assert len(data) < 1 << 20  # a small file ...
    path = str(tmp_path / "rank-00001.tvrank")
    with open(path, "wb") as f:
        f.write(b"TVRANK1\n" + data)
    tracemalloc.start()
    try:
        with pytest.raises(RecordingError, match="expands beyond"):
            open_recording(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 160 << 20  # ... that never takes more than the cap (128 MB) to refuse


def test_a_blob_bomb_in_the_group_store_is_refused(group, tmp_path, monkeypatch):
    from thundervis.recording import typed
    g = _group_copy(group, tmp_path)
    store = os.path.join(g, "traces.tvstore")
    conn = sqlite3.connect(store)
    conn.execute("UPDATE blobs SET data = ?", (_bomb(48 << 20),))
    conn.commit()
    conn.close()
    monkeypatch.setattr(typed, "MAX_DECOMPRESSED", 16 << 20)
    with open_recording(os.path.join(g, "rank-00000.tvrec")) as rec:
        p = rec.overview().graphs[0].chains[0].passes[0]
        with pytest.raises(RecordingError, match="expands beyond"):
            rec.pass_text(p.ref)


def test_a_huge_world_size_does_not_build_range_world(group, tmp_path, capsys):
    g = _group_copy(group, tmp_path)
    path = os.path.join(g, "rank-00000.tvrec")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE events SET data = ? WHERE event = 'distributed'",
                 (json.dumps({"rank": 0, "local_rank": 0, "world_size": 10 ** 12, "node_rank": 0}),))
    conn.commit()
    conn.close()
    (code, out, err), took = _within(30, lambda: run_cli(capsys, "ls", g))
    assert "Traceback" not in err and took < 20
    assert "world size" in out + err


# -- every column, every wrong type: the class, not the cases ---------------------------------------

_MUTATIONS = ("x", b"\x00\xff", float("inf"), -1)


def _read_everything(rec) -> None:
    """Call every reader method a view calls on a whole recording."""
    ov = rec.overview()
    ov.as_json()
    rec.timings()
    rec.events()
    rec.failures()
    rec.rerun_results()
    rec.source_files()
    for g in ov.graphs:
        for c in g.chains:
            for p in c.passes[:1] + c.passes[-1:]:
                rec.pass_text(p.ref)
                rec.pass_trace(p.ref)
                for s in rec.symbols(p.ref)[:2]:
                    rec.symbol(p.ref, s.uid)
        for k in g.kernels[:2]:
            rec.kernel_source(k)
    rec.symbols_at_line(12)


@pytest.mark.slow
def test_every_column_of_the_wrong_type_is_refused_or_harmless(tmp_path):
    """Each column of each table set to each wrong type, one at a time: every reader call either
    works or raises RecordingError / UnknownItem, never anything else."""
    from thundervis.recording import UnknownItem
    base = str(tmp_path / "small.tvrec")
    write_recording(base, n_symbols=12)
    conn = sqlite3.connect(base)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    columns = [(t, r[1]) for t in tables for r in conn.execute(f"PRAGMA table_info({t})")]
    conn.close()
    assert len(columns) > 100
    path = str(tmp_path / "m.tvrec")
    refused = harmless = 0
    for table, column in columns:
        for value in _MUTATIONS:
            shutil.copy(base, path)
            try:
                _sql(path, f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT MIN(rowid) FROM {table})",
                     params=(value,))
            except sqlite3.Error:  # NOT NULL, UNIQUE, CHECK: SQLite refuses the file itself
                continue
            try:
                with open_recording(path, check=False) as rec:
                    _read_everything(rec)
                harmless += 1
            except (RecordingError, UnknownItem) as e:
                assert "\n" not in str(e), (table, column, value, str(e))
                refused += 1
            except Exception as e:  # pragma: no cover - the failure this test exists for
                raise AssertionError(f"{table}.{column} = {value!r}: {type(e).__name__}: {e}") from e
    assert refused > 40 and harmless > 40, (refused, harmless)
