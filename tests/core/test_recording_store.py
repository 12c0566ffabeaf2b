"""The recording store: writer events -> SQLite -> reader dataclasses, and refusals of bad files."""
from __future__ import annotations

import os
import shutil
import sqlite3
import threading

import pytest

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
from thundervis.compiler.printer import print_trace
from thundervis.recording import (RecordingError, RecordingObserver, SCHEMA_VERSION, UnknownItem,
                                  open_recording)
from thundervis.recording.trace_text import symbol_rows

from core_helpers import line_of, run_cli


def _proxy(name):
    return TensorProxy(name, (4, 8), "float32", "cpu", (8, 1))


def _sym(uid, sym, args, out, origin=(), line=3, executor=None, subsymbols=(), seq_nr=None, fusion=False):
    return BoundSymbol(sym=sym, args=args, kwargs={}, outputs=out, uid=uid, origin=origin,
                       source=SourceInfo("/x/model.py", line, "y = a * b + c", "block"),
                       seq_nr=seq_nr, subsymbols=subsymbols, executor=executor, fusion=fusion)


def _fused_recording(path) -> str:
    """Write a recording by hand: acquire -> fuse (a kernel) for graph 0 forward and backward."""
    a, b, c, t0, t1 = (_proxy(n) for n in ("a", "b", "c", "t0", "t1"))
    mul = _sym("f0", "prims.mul", (a, b), t0, seq_nr=7)
    add = _sym("f1", "prims.add", (t0, c), t1, seq_nr=8)
    acquired = Trace("forward", (a, b, c), (mul, add), (t1,), chain="forward", next_uid=2, next_name=2)
    fusion = _sym("f2", "fw_fusion_0", (a, b, c), (t1,), origin=("f0", "f1"), executor="triton", fusion=True,
                  subsymbols=(mul.replace(executor="triton"), add.replace(executor="triton")))
    fused = acquired.replace(symbols=(fusion,), pass_name="fuse", next_uid=3)
    g1 = _proxy("g")
    bw = Trace("backward", (g1, a), (_sym("b0", "prims.mul", (g1, a), t0, seq_nr=7, line=3),),
               (t0,), chain="backward", next_uid=1)
    with RecordingObserver(str(path)) as rec:
        rec.start_run(script="/x/model.py", module=None, argv=["/x/model.py"], cwd="/x")
        rec.graph_started(0, {"n_inputs": 3, "n_nodes": 2, "reason": None})
        rec.pass_done(0, "forward", 0, "acquire", acquired, 0.001, True)
        rec.pass_done(0, "forward", 1, "fuse", fused, 0.002, True)
        rec.kernels_built(0, "forward", [{
            "name": "fw_fusion_0", "executor": "triton", "uid": "f2", "members": ["f0", "f1"],
            "ops": ["mul", "add"], "code": "def kernel(): pass", "language": "python",
            "inputs": [], "outputs": [], "pass": "fuse", "note": None, "trace": None,
            "source_lines": [{"file": "/x/model.py", "line": 3, "code": "y = a * b + c",
                              "module": "block", "direction": "forward"}]}])
        rec.pass_done(0, "backward", 0, "acquire", bw, 0.001, True)
        rec.graph_finished(0, 0.01)
        rec.finish_run("ok", 0)
    return str(path)


def test_recorded_run_holds_every_pass_of_forward_and_backward(recorded):
    path, script = recorded
    with open_recording(path) as rec:
        run = rec.run()
        assert run.status == "ok" and run.exit_code == 0
        assert run.argv == [script, "--flag", "1"] and run.script == script
        assert run.torch and run.python and run.ended_at >= run.started_at
        graphs = rec.graphs()
        assert len(graphs) == 2  # the new batch size recompiled
        for g in graphs:
            kinds = [c.kind for c in g.chains]
            assert kinds == ["dynamo", "joint", "forward", "backward"]
            fw = g.chain("forward")
            assert [p.name for p in fw.passes][0] == "acquire" and fw.passes[-1].name == "codegen"
            assert [p.index for p in fw.passes] == list(range(len(fw.passes)))
            assert fw.status == "compiled" and g.compile_s > 0
            for c in g.chains:
                for p in c.passes:
                    trace = rec.pass_trace(g.id, c.kind, p.index)
                    assert len(trace.symbols) == p.n_symbols
                    assert trace.pass_name == p.name and trace.chain == c.kind
                    assert rec.pass_text(g.id, c.kind, p.index) == print_trace(trace)


def test_recompile_is_a_new_graph_with_the_reason(recorded):
    with open_recording(recorded[0]) as rec:
        g0, g1 = rec.graphs()
    assert g0.recompile_reason is None
    assert g1.recompile_reason and "size mismatch" in g1.recompile_reason
    assert g1.reason.startswith("recompile:")


def test_symbols_keep_source_and_seq_nr(recorded):
    path, script = recorded
    tanh_line = line_of(script, "LINE_TANH")
    with open_recording(path) as rec:
        syms = rec.symbols(0, "forward", 0)
        assert [s.position for s in syms] == list(range(len(syms)))
        tanh = [s for s in syms if s.sym == "aten.tanh.default"]
        assert len(tanh) == 1 and tanh[0].source.line == tanh_line and tanh[0].source.file == script
        assert tanh[0].seq_nr is not None
        bw = [s for s in rec.symbols(0, "backward", 0) if s.seq_nr == tanh[0].seq_nr]
        assert any(s.sym == "aten.tanh_backward.default" for s in bw)
        last = rec.graph(0).chain("forward").passes[-1].index
        assert all(s.executor for s in rec.symbols(0, "forward", last) if s.parent is None)


def test_kernels_and_failures_are_recorded(tmp_path):
    path = _fused_recording(tmp_path / "k.tvrec")
    with RecordingObserver(str(tmp_path / "f.tvrec")) as w:
        w.start_run(script=None, module="pkg.train", argv=["pkg.train"], cwd="/")
        w.graph_started(0, {"n_inputs": 1})
        w.chain_failed(0, "backward", "unsupported: boom", "Traceback ...")
        w.chain_failed(0, None, "graph: boom", "")
        w.finish_run("failed", 1, "Traceback: x")
    with open_recording(path) as rec:
        (k,) = rec.kernels()
        assert (k.name, k.executor, k.uid, k.members, k.ops) == ("fw_fusion_0", "triton", "f2",
                                                                  ("f0", "f1"), ("mul", "add"))
        assert k.source_lines[0]["line"] == 3 and not hasattr(k, "code")  # code loads on request
        src = rec.kernel_source(k)
        assert src.code == "def kernel(): pass" and src.name == k.name and src.kernel_id == k.id
        assert rec.graph(0).kernels == (k,)
        subs = [s for s in rec.symbols(0, "forward", 1) if s.parent == "f2"]
        assert [s.uid for s in subs] == ["f0", "f1"]
    with open_recording(str(tmp_path / "f.tvrec")) as rec:
        g = rec.graph(0)
        assert g.chain("backward").status == "failed" and "boom" in g.chain("backward").error
        assert [f.chain for f in g.failures] == ["backward", None]
        assert rec.run().status == "failed" and rec.run().traceback == "Traceback: x"
        assert rec.run().target == "-m pkg.train"
        with pytest.raises(UnknownItem, match="chains: backward"):
            g.chain("forward")


def test_events_from_other_threads_and_bad_traces_never_raise(tmp_path):
    a = _proxy("a")
    good = Trace("forward", (a,), (_sym("f0", "prims.neg", (a,), _proxy("t0")),), (a,))
    bad = good.replace(symbols=(_sym("f0", "prims.neg", (object(),), _proxy("t0")),))
    w = RecordingObserver(str(tmp_path / "t.tvrec"))
    w.start_run(script="s.py", module=None, argv=["s.py"], cwd="/")
    threads = [threading.Thread(target=w.pass_done, args=(0, "backward", i, f"p{i}", good, 0.0, True))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.pass_done(0, "forward", 0, "acquire", bad, 0.0, True)  # cannot serialize: noted, not raised
    assert w.write_errors == 1
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C inside a write rolls the write back
        w._write("x", lambda c: (c.execute("INSERT INTO events(event, at) VALUES ('half', 0)"),
                                 (_ for _ in ()).throw(KeyboardInterrupt())))
    w.close()
    w.pass_done(0, "forward", 1, "late", good, 0.0, True)  # after close: ignored
    with open_recording(str(tmp_path / "t.tvrec")) as rec:
        assert len(rec.graphs()) == 0  # no graph_started: passes exist but no graph row
        assert [p for p in range(8) if rec.pass_text(0, "backward", p)] == list(range(8))
        assert [e.event for e in rec.events()] == ["write_error"]


def _copy(src, dst):
    shutil.copyfile(src, dst)
    return str(dst)


def _bad_files(tmp_path, good: str) -> dict:
    files = {"missing": str(tmp_path / "nope.tvrec"), "directory": str(tmp_path)}
    (tmp_path / "empty.tvrec").write_bytes(b"")
    files["empty"] = str(tmp_path / "empty.tvrec")
    (tmp_path / "text.tvrec").write_text("hello, I am not a recording\n" * 20)
    files["text"] = str(tmp_path / "text.tvrec")
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t(x)")
    other.commit()
    other.close()
    files["other sqlite"] = str(tmp_path / "other.db")
    newer = _copy(good, tmp_path / "newer.tvrec")
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    files["newer"] = newer
    data = open(good, "rb").read()
    (tmp_path / "truncated.tvrec").write_bytes(data[: len(data) // 2])
    files["truncated"] = str(tmp_path / "truncated.tvrec")
    (tmp_path / "tiny.tvrec").write_bytes(data[:50])
    files["tiny"] = str(tmp_path / "tiny.tvrec")
    page = int.from_bytes(data[16:18], "big")
    mid = (len(data) // page // 2) * page
    corrupted = data[:mid] + bytes(range(256)) * (page // 256) * 3 + data[mid + 3 * page:]
    (tmp_path / "corrupted.tvrec").write_bytes(corrupted)
    files["corrupted"] = str(tmp_path / "corrupted.tvrec")
    return files


EXPECTED = {"missing": "does not exist", "directory": "directory", "empty": "not a thundervis recording",
            "text": "not a thundervis recording", "other sqlite": "not a thundervis recording",
            "newer": "newer thundervis", "truncated": "truncated", "tiny": "truncated",
            "corrupted": "corrupted"}


def test_reader_refuses_bad_files_with_one_sentence(tmp_path, recorded):
    files = _bad_files(tmp_path, recorded[0])
    for kind, path in files.items():
        with pytest.raises(RecordingError) as e:
            open_recording(path)
        msg = str(e.value)
        assert EXPECTED[kind] in msg, (kind, msg)
        assert "\n" not in msg and msg.endswith("."), (kind, msg)


@pytest.mark.parametrize("command", ["ls", "show"])
def test_ls_and_show_refuse_bad_files_exit_2(tmp_path, recorded, capsys, command):
    for kind, path in _bad_files(tmp_path, recorded[0]).items():
        code, out, err = run_cli(capsys, command, path)
        assert code == 2, (kind, out, err)
        assert err.count("\n") == 1 and err.startswith("thundervis: ") and "Traceback" not in err, (kind, err)
        assert EXPECTED[kind] in err


def test_schema_is_marked_and_versioned(recorded):
    conn = sqlite3.connect(recorded[0])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"run", "graphs", "chains", "passes", "symbol_rows", "pass_symbols", "kernels", "kernel_timings",
            "rerun_results", "failures", "events"} <= tables
    assert conn.execute("SELECT COUNT(*) FROM kernel_timings").fetchone()[0] == 0
    conn.close()
    assert not os.path.exists(recorded[0] + "-wal") or os.path.getsize(recorded[0] + "-wal") == 0


def test_cached_trace_encoder_matches_the_compiler_serializer():
    import torch
    from thundervis.compiler import CompileObserver, jit
    from thundervis.compiler.serialize import trace_to_json
    from thundervis.recording.writer import _TraceEncoder

    class Collect(CompileObserver):
        traces = []

        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            self.traces.append(trace)

    f = jit(lambda x, w: torch.softmax(x @ w, -1).sum(), executors=["torch"], observer=Collect())
    f(torch.randn(4, 8, requires_grad=True), torch.randn(8, 8)).backward()
    assert len(Collect.traces) > 8
    encoder = _TraceEncoder()
    assert [encoder.to_json(t) for t in Collect.traces] == [trace_to_json(t) for t in Collect.traces]
    assert [encoder.print(t) for t in Collect.traces] == [print_trace(t) for t in Collect.traces]
    assert ([encoder.symbol_rows(t.graph, t.chain, i, t) for i, t in enumerate(Collect.traces)]
            == [list(symbol_rows(t.graph, t.chain, i, t)) for i, t in enumerate(Collect.traces)])


def test_cached_trace_encoder_matches_on_unusual_values():
    # Values off the encoder's fast paths (floats, non-finite floats, bools, dtypes, slices,
    # non-str dict keys, non-ASCII text, several origins) must give the same text as the compiler.
    import dataclasses

    import torch
    from thundervis.compiler.serialize import trace_to_json
    from thundervis.recording.writer import _TraceEncoder

    x, y = TensorProxy("x", (2, 3), "float32", "cpu", (3, 1)), TensorProxy("t0", (2,), "float32", "cpu", None)
    kwargs = {"a": 1.5, "b": float("-inf"), "c": True, "d": torch.float16, "e": None, "f": slice(1, None, 2),
              "g": (1,), "h": [2, [x]], 3: "k", "i": torch.device("cpu"), "j": ...}
    sub = BoundSymbol("prims.sum", (x, [1]), {}, y, "f2", origin=("f1",))
    b = BoundSymbol("aten.sum", (x,), kwargs, (y, None), "f1", origin=("d1", "d2", "d\u00e9"), seq_nr=4,
                    source=SourceInfo("m\u00e9.py", 3, "y = x.sum(1)", "m", "forward"), aten="aten.sum.dim_IntList",
                    executor="torch", note="n\u00e9", subsymbols=(sub,))
    trace = Trace("forward", (x,), (b, dataclasses.replace(b, uid="f3")), (y, 2.5), chain="forward", graph=0,
                  pass_name="p", meta={"duration_ms": 0.5, "skip": [1]})
    encoder = _TraceEncoder()
    for _ in range(2):  # cold, then from the cache
        assert encoder.to_json(trace) == trace_to_json(trace)
        assert encoder.print(trace) == print_trace(trace)
        assert encoder.symbol_rows(0, "forward", 1, trace) == list(symbol_rows(0, "forward", 1, trace))


def test_unchanged_passes_share_symbol_rows(recorded):
    with open_recording(recorded[0]) as rec:
        chain = rec.graph(0).chain("forward")
        unchanged = [p for p in chain.passes if not p.changed and p.index > 0]
        assert unchanged, "expected a pass that changed nothing"
        p = unchanged[0]
        before = rec.symbols(0, "forward", p.index - 1)
        mine = rec.symbols(0, "forward", p.index)
        assert [(s.uid, s.sym, s.executor) for s in mine] == [(s.uid, s.sym, s.executor) for s in before]
        assert {s.pass_index for s in mine} == {p.index}
        everything = rec.chain_symbols(0, "forward")
        assert {s.pass_index for s in everything} == {q.index for q in chain.passes}
        # Schema 4: each distinct symbol row once, each pass a list of row ids (shared passes none).
        lists = rec.store.rows("SELECT COUNT(*) FROM pass_symbols WHERE graph_id=0 AND chain='forward'")[0][0]
        assert lists < len(chain.passes)
        stored = rec.store.rows("SELECT COUNT(*) FROM symbol_rows")[0][0]
        total = sum(len(rec.chain_symbols(g.id, c.kind)) for g in rec.graphs() for c in g.chains)
        assert stored < total / 2


def _symbol_tuples(symbols):
    return [(s.graph, s.chain, s.pass_index, s.position, s.uid, s.parent, s.sym, s.origin, s.source,
             s.seq_nr, s.aten, s.executor, s.note) for s in symbols]


def test_symbol_rows_are_written_when_the_run_ends_and_derived_for_a_killed_run(tmp_path):
    """Passes are committed as they finish; their ``symbols`` rows (an index over the trace JSON)
    come at the end. A reader of a run that never ended gets the same rows, derived from the JSON."""
    import torch
    from thundervis.compiler import jit

    path = str(tmp_path / "live.tvrec")
    writer = RecordingObserver(path)
    writer.start_run(script=None, module="m", argv=["m"], cwd="/")
    f = jit(lambda x, w: torch.tanh(x @ w).sum(), executors=["torch"], observer=writer)
    f(torch.randn(4, 8, requires_grad=True), torch.randn(8, 8)).backward()
    with open_recording(path) as rec:  # as a reader sees it if the writer's process dies now
        assert rec.store.rows("SELECT COUNT(*) FROM main.pass_symbols")[0][0] == 0
        (g,) = rec.graphs()
        derived = {c.kind: _symbol_tuples(rec.chain_symbols(g.id, c.kind)) for c in g.chains}
        for c in g.chains:
            last = c.passes[-1].index
            want = list(symbol_rows(g.id, c.kind, last, rec.pass_trace(g.id, c.kind, last)))
            assert [t[3:7] for t in _symbol_tuples(rec.symbols(g.id, c.kind, last))] == \
                   [(r[3], r[4], r[5], r[6]) for r in want]
            assert want and all(d[2] in {p.index for p in c.passes} for d in derived[c.kind])
        line = next(s.source.line for s in rec.symbols(g.id, "forward", 0) if s.source)
        assert rec.symbols_at_line(line)
        # A reader following the live run sees the passes committed after it first looked.
        f(torch.randn(4, 8, dtype=torch.float64, requires_grad=True),
          torch.randn(8, 8, dtype=torch.float64)).backward()  # recompiles for the new dtype
        g2 = rec.graphs()[-1]
        assert g2.id != g.id and rec.chain_symbols(g2.id, "backward")
    writer.finish_run("ok", 0)
    writer.close()
    with open_recording(path) as rec:
        assert rec.store.rows("SELECT COUNT(*) FROM main.pass_symbols")[0][0] > 0
        assert rec.store.rows("SELECT name FROM sqlite_temp_master") == []  # nothing left to derive
        assert {c.kind: _symbol_tuples(rec.chain_symbols(g.id, c.kind)) for c in g.chains} == derived
        assert rec.chain_symbols(g2.id, "backward")


def test_kept_traces_are_written_out_when_too_many_wait(tmp_path, monkeypatch):
    import thundervis.recording.writer as writer_module
    a, t0 = _proxy("a"), _proxy("t0")
    trace = Trace("forward", (a,), (_sym("f0", "prims.neg", (a,), t0),), (t0,), chain="forward", next_uid=1)
    path = str(tmp_path / "w.tvrec")
    for limit, stored in ((1000, 0), (0, 1)):
        monkeypatch.setattr(writer_module, "MAX_PENDING_SYMBOLS", limit)
        if os.path.exists(path):
            os.remove(path)
        w = RecordingObserver(path)
        w.start_run(script=None, module="m", argv=["m"], cwd="/")
        w.pass_done(0, "forward", 0, "acquire", trace, 0.001, True)
        with open_recording(path) as rec:  # the run is still going
            assert rec.store.rows("SELECT COUNT(*) FROM main.pass_symbols")[0][0] == stored
        w.close()
