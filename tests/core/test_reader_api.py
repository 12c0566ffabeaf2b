"""The reader API every view uses: the typed view model, read-only opening without sidecar files,
worker threads, the revision a live viewer polls, symbol details."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading

import pytest

from thundervis.present.default_view import pick_chain, pick_pass
from thundervis.recording import (KernelInfo, Overview, PassRef, RecordingObserver, ResultsNotStored,
                                  RerunResult, UnknownItem, open_recording)
from thundervis.recording.results import append_rerun_results

from core_helpers import line_of, run_cli
from test_recording_store import _fused_recording, _proxy, _sym

SIDECARS = ("-wal", "-shm", "-journal")


def _sidecars(path) -> list[str]:
    return [s for s in SIDECARS if os.path.exists(str(path) + s)]


def _copy(src, folder, name="copy.tvrec") -> str:
    os.makedirs(folder, exist_ok=True)
    dst = os.path.join(str(folder), name)
    shutil.copy(src, dst)
    return dst


# -- the view model -------------------------------------------------------------------------------

def test_ls_json_is_the_overview(recorded, capsys):
    path, _ = recorded
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    with open_recording(path) as rec:
        ov = rec.overview()
    assert code == 0 and isinstance(ov, Overview)
    doc = json.loads(out)
    # ls adds the fallbacks (chains_eager, chains_total, fallbacks, each fusion's ran_in_torch) and the
    # code Dynamo left to eager (eager_regions, eager_head), the communication (collectives), the
    # roofline model (modelled_step, roofline; each fusion's roofline and targets), each chain's timed
    # line (present.chain_times; None: not profiled), the torch.compile options a run overrode (none
    # here), the compile times (compile_text; each graph's compile), the numerics and ls's lines of
    # it, an abstract run's answer (None here), the memory ledger (saved_bytes, memory_peak),
    # which rank of a multi-process run it is (None here) and the compiled share (static here: no
    # --profile)
    added = ("chains_eager", "chains_total", "fallbacks", "eager_regions", "eager_head", "collectives",
             "modelled_step", "roofline", "numerics", "numerics_lines", "compile_options_not_used", "run_status",
             "compile_text", "abstract", "abstract_lines", "saved_bytes", "memory_peak", "rank", "compiled_share")
    assert set(added) == set(doc) - set(json.loads(json.dumps(ov.as_json())))  # each one said here
    assert doc["eager_regions"] == [] and doc["eager_head"] == "0 of 4 chains ran eagerly"
    assert doc["abstract"] is None and doc["abstract_lines"] == [] and doc["compile_text"].startswith("compiled ")
    assert doc["collectives"]["in_traces"] == 0 and doc["collectives"]["between_graphs"] == 0
    assert doc["compile_options_not_used"] == [] and doc["rank"] is None
    assert doc["compiled_share"]["measured"] is False and "--profile" in doc["compiled_share"]["text"]
    base = {k: v for k, v in doc.items() if k not in added}
    for g in base["graphs"]:
        assert all(c.pop("timed") is None for c in g["chains"])
        assert g.pop("compile")["text"].startswith("compiled in ")  # present.compile_times
        for c in g["chains"]:  # the memory ledger (present.memory); measured only under --profile
            c.pop("saved_bytes"), c.pop("saved"), c.pop("peak_bytes")
            assert c.pop("measured_peak_bytes") is None
        for k in g["fusions"]:
            assert k.pop("ran_in_torch") is None
            k.pop("roofline"), k.pop("targets"), k.pop("numerics")
            assert k.pop("fold") is None  # present.kernel_folds: no repeated layers here
            ran = k.pop("ran_on")
            assert ran is None or ran["text"].startswith(("ran on", "runs on"))
            assert k.pop("label") == f"{k['name']} [{k.pop('tag')}]"  # the kernel table's (present.kernel_rows)
            assert isinstance(k.pop("sources_cell"), str)
    assert base == json.loads(json.dumps(ov.as_json()))
    assert ov.status == ov.run.status == "ok" and ov.revision.status == "ok"
    # The keys documented in docs/recording.md are all there.
    doc = json.loads(out)
    assert {"schema", "path", "run", "graphs"} <= set(doc)
    assert {"id", "compile_id", "reason", "recompile_reason", "graph_break_reason", "compile_ms", "n_inputs",
            "n_nodes", "chains", "fusions", "timings", "failures"} <= set(doc["graphs"][0])


def test_kernels_carry_no_code_until_asked(tmp_path):
    path = _fused_recording(tmp_path / "k.tvrec")
    with open_recording(path) as rec:
        (k,) = rec.overview().graph(0).kernels
        assert isinstance(k, KernelInfo) and not hasattr(k, "code") and not hasattr(k, "trace_json")
        assert rec.find_kernel(k.name) == k == rec.kernel(k.id) and k.graph == 0 and k.chain == "forward"
        assert rec.kernel_source(k).code == "def kernel(): pass"
        assert k.as_json()["sources"] == ["model.py:3"] and k.as_json()["timing"] is None
        with pytest.raises(UnknownItem, match=f"closest: {k.name}"):
            rec.find_kernel(k.name + "9")


def test_pick_pass_defaults_and_refusals(recorded):
    path, _ = recorded
    with open_recording(path) as rec:
        g, c, p = pick_pass(rec.graphs())
        assert (g.id, c.kind, p.index) == (0, "forward", c.passes[-1].index)
        assert rec.pass_text(p.ref) == rec.pass_text(0, "forward", p.index) == rec.pass_text(p)
        assert pick_pass(rec.graphs(), None, "backward", "cse")[2].name == "cse"
        with pytest.raises(UnknownItem, match="chains: dynamo, joint, forward, backward"):
            pick_chain(rec.graphs(), 0, "inference")
        with pytest.raises(UnknownItem, match="graphs: 0, 1"):
            pick_pass(rec.graphs(), 7)


def test_symbol_detail_links_kernel_twins_and_neighbours(tmp_path):
    path = _fused_recording(tmp_path / "k.tvrec")
    with open_recording(path) as rec:
        d = rec.symbol(PassRef(0, "forward", 0), "f0")
        assert d.symbol.sym == "prims.mul" and d.module == "block"
        assert [s.uid for s in d.became] == ["f2"] and d.came_from == ()
        assert d.kernel is not None and d.kernel.uid == "f2" and d.kernel == rec.kernels()[0]
        assert [s.uid for s in d.ends] == ["f2"]
        assert [(s.chain, s.uid) for s in d.twins] == [("backward", "b0")]  # same seq_nr
        assert d.snippet.recorded is False and d.snippet.lines == ("y = a * b + c",)  # file not stored
        fused = rec.symbol(PassRef(0, "forward", 1), "f2")
        assert {s.uid for s in fused.came_from} == {"f0", "f1"}
        json.dumps(d.as_json())
        with pytest.raises(UnknownItem):
            rec.symbol(PassRef(0, "forward", 0), "nope")


def test_symbol_snippet_comes_from_the_recorded_source_text(recorded, tmp_path):
    path, script = recorded
    line = line_of(script, "LINE_TANH")
    with open(script) as f:
        text = f.read()
    moved = _copy(path, tmp_path / "elsewhere")  # the script need not exist where the file is read
    with open_recording(moved) as rec:
        assert script in rec.source_files() and rec.source_text(script) == text
        uid = next(s.uid for s in rec.symbols(0, "forward", 0) if s.source and s.source.line == line)
        d = rec.symbol(PassRef(0, "forward", 0), uid)
    assert d.snippet.recorded and d.snippet.line == line
    assert d.snippet.lines[line - d.snippet.first_line].strip().endswith("# LINE_TANH")
    assert d.snippet.first_line == line - 3 and len(d.snippet.lines) == 7
    assert [s.chain for s in d.twins] and all(s.chain == "backward" for s in d.twins)


# -- opening read-only, without sidecar files -----------------------------------------------------

def test_reading_a_closed_recording_leaves_no_sidecars(recorded, tmp_path, capsys):
    path = _copy(recorded[0], tmp_path)
    assert _sidecars(path) == []
    for argv in (("ls", path), ("show", path), ("lineage", path, "--uid", "f1"), ("diff", path, path)):
        run_cli(capsys, *argv)
        assert _sidecars(path) == [], argv
    with open_recording(path) as rec:
        rec.overview()
        rec.symbols(0, "forward", 0)
        assert not rec.immutable  # a finished recording is in rollback-journal mode: plain read-only
    assert _sidecars(path) == []


def test_wal_mode_file_without_its_wal_is_read_immutable(recorded, tmp_path, capsys):
    """Recordings written before the writer switched finished files back to rollback-journal mode
    are in WAL mode; reading them must not create -wal/-shm files either."""
    path = _copy(recorded[0], tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert _sidecars(path) == []
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0 and "graph 1" in out
    with open_recording(path) as rec:
        assert rec.immutable and rec.overview().graphs
    assert _sidecars(path) == []


def test_read_only_folder(recorded, tmp_path, capsys, monkeypatch):
    path = _copy(recorded[0], tmp_path / "ro")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # the hard case: WAL mode needs a -shm file to read
    conn.close()
    real_access = os.access

    def no_write(p, mode, *a, **kw):  # what a read-only folder says (root ignores chmod)
        if mode & os.W_OK and os.path.abspath(str(p)).startswith(str(tmp_path / "ro")):
            return False
        return real_access(p, mode, *a, **kw)
    monkeypatch.setattr(os, "access", no_write)
    os.chmod(tmp_path / "ro", 0o555)
    try:
        code, out, err = run_cli(capsys, "ls", path)
        assert code == 0 and "graph 0" in out, err
        code, out, err = run_cli(capsys, "show", path)
        assert code == 0 and "inputs ▸" in out, err
        with pytest.raises(ResultsNotStored, match="read-only"):
            append_rerun_results(path, [RerunResult("k", "torch", "cpu", "random", 1, "ok")])
    finally:
        os.chmod(tmp_path / "ro", 0o755)
    assert _sidecars(path) == []


# -- threads and live runs ------------------------------------------------------------------------

def test_worker_threads_share_one_reader(recorded):
    path, script = recorded
    line = line_of(script, "LINE_TANH")
    with open_recording(path) as rec:
        want = (rec.overview().as_json(), [s.as_json() for s in rec.chain_symbols(0, "backward")],
                [x.as_json() for x in rec.lineage_of_source(os.path.basename(script), line)])
        got, errors = [], []

        def work():
            try:
                for _ in range(3):
                    got.append((rec.overview().as_json(),
                                [s.as_json() for s in rec.chain_symbols(0, "backward")],
                                [x.as_json() for x in rec.lineage_of_source(os.path.basename(script), line)]))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(repr(e))
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == [] and len(got) == 18 and all(g == want for g in got)


def test_revision_changes_when_a_live_run_commits(tmp_path):
    a, t0 = _proxy("a"), _proxy("t0")
    from thundervis.compiler.ir import Trace
    trace = Trace("forward", (a,), (_sym("f0", "prims.neg", (a,), t0),), (t0,), chain="forward", next_uid=1)
    path = str(tmp_path / "live.tvrec")
    w = RecordingObserver(path)
    w.start_run(script=None, module="m", argv=["m"], cwd="/")
    w.graph_started(0, {"n_inputs": 1})
    with open_recording(path) as rec:
        r0 = rec.revision()
        assert r0 == rec.revision() and r0.status == "running"
        assert rec.overview().graph(0).chains == ()
        w.pass_done(0, "forward", 0, "acquire", trace, 0.001, True)
        r1 = rec.revision()
        assert r1 != r0 and r1.status == "running"
        (c,) = rec.overview().graph(0).chains  # not a stale cached overview
        assert [p.name for p in c.passes] == ["acquire"]
        assert [s.uid for s in rec.symbols(c.passes[0])] == ["f0"]  # derived in memory: no rows yet
        w.finish_run("ok", 0)
        assert rec.revision().status == "ok" and rec.revision() != r1
    w.close()
    assert _sidecars(path) == []
