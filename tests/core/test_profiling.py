"""Per-symbol profiling: plain callable when off, bounded samples and one report when on, partial
flush at run end, timings stored in the recording and shown by ``ls --json``."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3

import pytest
import torch

from thundervis.compiler.backend import ThundervisCompiler, jit, reset_graph_ids
from thundervis.compiler.observer import CompileObserver
from thundervis.compiler.profiling import ChainProfiler, ProfiledChain, ProfileSettings, flush_all

from core_helpers import run_cli, write_script


class Events(CompileObserver):
    """Keeps the runtime events and the final trace of each chain."""

    def __init__(self):
        self.runtime_events = []
        self.finals = {}

    def runtime(self, graph, chain, event, data):
        self.runtime_events.append((graph, chain, event, data))

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        if name == "codegen":
            self.finals[(graph, chain)] = trace

    def timings(self):
        return [e for e in self.runtime_events if e[2] == "timings"]

    def walls(self):
        return [e for e in self.runtime_events if e[2] == "walls"]


def f(x, w):
    return torch.tanh(x @ w + 1.0).sum(-1)


@pytest.fixture(autouse=True)
def fresh_graph_ids():
    """Each test compiles from graph 0 on."""
    torch._dynamo.reset()
    reset_graph_ids()


def _compiled_fns(backend: ThundervisCompiler, x, w):
    """Compile ``f`` through the backend and return the guarded callables Dynamo received."""
    guarded = []
    original = backend._chain_compiler

    def spy(graph, chain):
        inner = original(graph, chain)

        def compile_fx_graph(gm, example_inputs):
            fn = inner(gm, example_inputs)
            guarded.append(fn)
            return fn
        return compile_fx_graph
    backend._chain_compiler = spy
    torch._dynamo.reset()
    cf = torch.compile(f, backend=backend)
    return cf, guarded


def test_profiling_off_runs_the_plain_generated_function():
    obs = Events()
    backend = ThundervisCompiler(executors=["torch"], observer=obs)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    cf, guarded = _compiled_fns(backend, x, w)
    for _ in range(3):
        torch.testing.assert_close(cf(x, w), f(x, w))
    (run,) = guarded
    fn = run.state["fn"]
    assert not isinstance(fn, ProfiledChain)
    # The very function codegen exec'd from the plain source: no hooks in it.
    assert fn.__code__.co_filename == "<thundervis graph 0 inference>"
    assert "_tv_profiler" not in fn.__code__.co_names and "_tv_profiler" not in fn.__globals__
    assert "_tv_profiler" not in obs.finals[(0, "inference")].meta["python"]
    assert obs.timings() == []


def test_profiling_times_k_calls_then_switches_back_to_plain():
    obs = Events()
    settings = ProfileSettings(warmup=2, steps=3)
    backend = ThundervisCompiler(executors=["torch"], observer=obs, profile=settings)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    cf, guarded = _compiled_fns(backend, x, w)
    for i in range(12):
        torch.testing.assert_close(cf(x, w), f(x, w))
        if i == 0:
            (run,) = guarded
            assert isinstance(run.state["fn"], ProfiledChain)
            chain = run.state["fn"]
        if i < 4:
            assert obs.timings() == []
        if i < 7:  # calls 5..7 are the untimed ones whose wall time is kept
            assert obs.walls() == [] and run.state["fn"] is chain
    assert run.state["fn"] is chain.plain  # profiling done: the plain callable, no wrapper left
    (walls,) = obs.walls()  # sent once, after the timings
    assert obs.runtime_events.index(walls) > obs.runtime_events.index(obs.timings()[0])
    assert walls[:2] == (0, "inference")
    assert walls[3]["calls"] == 3 and len(walls[3]["walls_us"]) == 3 and not walls[3]["partial"]
    assert all(w > 0 for w in walls[3]["walls_us"]) and walls[3]["clock"] == "host"
    assert chain.plain.__code__.co_filename == "<thundervis graph 0 inference>"
    (event,) = obs.timings()  # one report, however long the run
    graph, chain_name, _, data = event
    assert (graph, chain_name) == (0, "inference")
    assert data["clock"] == "host" and data["calls"] == 3 and not data["partial"]
    final = obs.finals[(0, "inference")]
    called = [b for b in final.symbols if b.sym != "del"]
    assert [s["uid"] for s in data["symbols"]] == [b.uid for b in called]
    for s in data["symbols"]:
        assert s["calls"] == 3 and len(s["samples_us"]) == 3 and len(s["starts_us"]) == 3
        assert 0 < s["min_us"] <= s["median_us"] <= s["max_us"]
        assert s["total_us"] == pytest.approx(sum(s["samples_us"]))
        assert s["gbps"] == pytest.approx(s["bytes"] / s["median_us"] / 1e3)
    assert sum(s["share"] for s in data["symbols"]) == pytest.approx(1.0)
    mm = next(s for s in data["symbols"] if s["name"] in ("prims.mm", "prims.matmul"))
    assert mm["bytes_read"] == (4 * 8 + 8 * 8) * 4 and mm["bytes_written"] == 4 * 8 * 4
    assert data["step"]["median_us"] > 0 and len(data["call_starts_us"]) == 3


def test_instrumented_source_is_separate_from_plain_source():
    obs = Events()
    cf = jit(f, executors=["torch"], observer=obs, profile=ProfileSettings(warmup=0, steps=1))
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    cf(x, w)
    final = obs.finals[(0, "inference")]
    assert "_tv_profiler" not in final.meta["python"]
    (_, _, _, data) = obs.timings()[0]
    assert data["calls"] == 1


def test_partial_timings_are_flushed():
    obs = Events()
    cf = jit(f, executors=["torch"], observer=obs, profile=ProfileSettings(warmup=1, steps=50))
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    for _ in range(3):
        cf(x, w)
    assert obs.timings() == []
    assert flush_all() >= 1
    (_, _, _, data) = obs.timings()[0]
    assert data["partial"] and data["calls"] == 2
    assert flush_all() == 0  # reported once


def test_wall_times_of_fewer_untimed_calls_are_flushed_after_the_timings():
    obs = Events()
    cf = jit(f, executors=["torch"], observer=obs, profile=ProfileSettings(warmup=0, steps=3))
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    for _ in range(5):  # 3 timed, then 2 of the 3 untimed calls
        cf(x, w)
    assert len(obs.timings()) == 1 and obs.walls() == []
    assert flush_all() >= 1
    (_, _, _, data) = obs.walls()[0]
    assert data["partial"] and data["calls"] == 2 and len(data["walls_us"]) == 2
    assert flush_all() == 0  # reported once


def test_capture_and_zero_steps_keep_the_schedule():
    """The first call's capture is not one of the K timed calls; no step to time ends profiling
    at once, with nothing reported."""
    for steps, events in ((3, [("timings", 3), ("walls", 3)]), (0, [])):
        obs = Events()
        cf = jit(f, executors=["torch"], observer=obs,
                 profile=ProfileSettings(warmup=0, steps=steps, capture_limit_bytes=1 << 20))
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        for _ in range(10):
            cf(x, w)
        assert [(e, d["calls"]) for _, _, e, d in obs.runtime_events if e in ("timings", "walls")] == events


def test_wall_call_is_bounded_by_steps_and_keeps_the_result():
    prof = ChainProfiler(0, "forward", [], ProfileSettings(steps=2), CompileObserver())
    outs = [prof.wall_call(lambda args: sum(args), [1, 2]) for _ in range(4)]
    assert outs == [3] * 4 and len(prof.walls) == 2
    assert not prof.report_walls()  # never before the timings


def test_samples_are_bounded_by_steps():
    prof = ChainProfiler(0, "forward", [], ProfileSettings(steps=2), CompileObserver())
    for _ in range(5):
        prof.begin_call()
        prof.end_call()
    assert prof.calls == 2 and len(prof.call_starts) == 2


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory):
    """A recording of the small training script run with --profile (default executors)."""
    folder = tmp_path_factory.mktemp("profiled")
    script = write_script(folder, "train_prof.py", """
        for _ in range(5):
            model(torch.randn(4, 8)).backward()
    """)
    out = os.path.join(str(folder), "prof.tvrec")
    from thundervis.cli import main
    code = main(["run", "--profile", "--warmup", "1", "--steps", "3", "--capture-inputs",
                 "--capture-limit-mb", "0.0003", "--out", out, "--no-view", script])
    assert code == 0
    return out


def test_ls_json_shows_timings_per_kernel(profiled_run, capsys):
    code, out, _ = run_cli(capsys, "ls", profiled_run, "--json")
    assert code == 0
    doc = json.loads(out)
    g = doc["graphs"][0]
    timed = g["timings"]["symbols"]
    assert {t["chain"] for t in timed} == {"forward", "backward"}
    for t in timed:
        assert t["calls"] == 3 and t["clock"] == "host"
        assert set(t) >= {"calls", "median_us", "min_us", "max_us", "total_us", "share", "bytes", "gbps", "clock"}
    steps = {s["chain"]: s for s in g["timings"]["steps"]}
    assert set(steps) == {"forward", "backward"} and steps["forward"]["calls"] == 3
    for chain in ("forward", "backward"):
        share = sum(t["share"] for t in timed if t["chain"] == chain)
        assert share == pytest.approx(1.0)
    for k in g["fusions"]:  # every fusion kernel that ran has its timing
        assert k["timing"] is not None and k["timing"]["calls"] == 3
        match = [t for t in timed if t["chain"] == k["chain"] and t["name"] == k["name"]]
        assert match and match[0]["kind"] == "fusion"


def test_ls_prints_each_timed_chains_wall_time_against_its_kernels(profiled_run, capsys):
    # 1 warm-up, 3 timed calls, then 1 of the 3 untimed calls before the script ends (flushed then).
    code, out, _ = run_cli(capsys, "ls", profiled_run, "--brief")
    assert code == 0
    for chain in ("forward", "backward"):
        timed = re.search(rf"\n  {chain} .*\n(.*)\n", out).group(1)
        assert re.fullmatch(r" {13}timed · [\d.]+ (µs|ms) a call \(wall, median of 1 untimed call\)"
                            r" · kernels and torch ops [\d.]+ (µs|ms) \(\d+%(: nothing measurable between them|: the timed calls"
                            r" ran slower than the untimed ones; more --warmup calls time steadier ones)?\)", timed), timed
    fusion_lines = [line for line in out.splitlines() if line.startswith("  fusion ")]
    text = out
    code, out, _ = run_cli(capsys, "ls", profiled_run, "--json")
    doc = json.loads(out)
    timed = {c["kind"]: c["timed"] for c in doc["graphs"][0]["chains"]}  # the same line in the JSON
    assert timed["dynamo"] is None and all(f"timed · {timed[k]}\n" in text for k in ("forward", "backward"))
    for s in doc["graphs"][0]["timings"]["steps"]:
        assert len(s["walls_us"]) == 1 and s["wall_median_us"] == s["walls_us"][0] > 0
    # each fusion's line says its median time, as present.units writes it
    from thundervis.present.units import format_us
    fusions = doc["graphs"][0]["fusions"]
    assert len(fusion_lines) == len(fusions) > 0
    for line, k in zip(fusion_lines, fusions):
        assert f" ops · {format_us(k['timing']['median_us'])} median · " in line, line


def test_diff_of_two_profiled_runs_compares_their_chains_wall_time(profiled_run, capsys):
    code, out, _ = run_cli(capsys, "diff", profiled_run, profiled_run)
    assert code == 0
    assert re.search(r"chain time per call \(wall, median\)   A -> B   B/A\n"
                     r"  graph 0 forward: ([\d.]+ (µs|ms)) -> \1  1\.00x\n  graph 0 backward: ", out), out


def test_a_recording_made_before_wall_times_reads_without_them(profiled_run, tmp_path, capsys):
    old = str(tmp_path / "old.tvrec")
    shutil.copy(profiled_run, old)
    with contextlib.closing(sqlite3.connect(old)) as c, c:
        c.execute("ALTER TABLE graph_timings DROP COLUMN call_walls")
    from thundervis.recording import open_recording
    with open_recording(old) as rec:
        chains = rec.timings().chains
    assert chains and all(c.walls_us == () and c.wall_median_us is None and c.calls == 3 for c in chains)
    code, out, _ = run_cli(capsys, "ls", old, "--brief")
    assert code == 0
    assert out.count("· kernels and torch ops ") == 2 and out.count("a call (median of 3 timed calls) · wall time not recorded") == 2


def test_reader_timings_api(profiled_run):
    from thundervis.recording import open_recording
    with open_recording(profiled_run) as rec:
        tm = rec.timings()
        assert rec.timings() == tm
        assert rec.overview().graph(0).timings == tm.for_graph(0)
    fwd = tm.for_chain(0, "forward")
    assert [k.position for k in fwd] == list(range(len(fwd)))
    assert all(len(k.samples_us) == 3 for k in fwd)


def test_run_rejects_bad_profile_numbers(tmp_path, capsys):
    script = write_script(tmp_path, "s.py", "model(torch.randn(2, 8))\n")
    code, _, err = run_cli(capsys, "run", "--profile", "--steps", "0", "--no-view", script)
    assert code == 2 and "--steps" in err


def test_capture_inputs_within_the_limit(profiled_run):
    from thundervis.recording import open_recording
    from thundervis.rerun import rerun_kernel
    with open_recording(profiled_run) as rec:
        kernels = rec.kernels()
        notes = [e.data for e in rec.events("captured_inputs")]
    if not kernels:
        pytest.skip("no fusion executor built kernels here")
    assert {(n["kernel"], n["chain"]) for n in notes} == {(k.name, k.chain) for k in kernels}
    captured = [n for n in notes if n["file"]]
    assert sum(n["bytes"] for n in captured) <= 0.0003 * 2**20
    for n in notes:
        if n["file"]:
            assert os.path.exists(os.path.join(profiled_run + ".inputs", n["file"]))
        else:
            assert "capture limit" in n["skipped"]
    for n in captured:
        report = rerun_kernel(profiled_run, n["kernel"], chain=n["chain"], executor="torch",
                              inputs="captured", iters=1, store=False)
        assert report.inputs == "captured" and report.results[0].status == "ok"
