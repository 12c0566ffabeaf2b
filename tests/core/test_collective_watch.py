"""Collectives run between compiled graphs: recorded by the watcher, read back as rows, shown.

In-process, on a gloo process group of one rank (a ``HashStore``): DDP's reducer issues its
gradient all-reduce through the same ``c10d`` ops at any world size. FSDP2 skips its collectives
on one rank, so its test runs two spawned ranks (slow)."""
from __future__ import annotations

import json
import os
import textwrap

import pytest
import torch
import torch.distributed as dist

from core_helpers import line_of, run_cli
from thundervis.collective_watch import CollectiveWatcher, collective_name
from thundervis.compiler import chain_calls
from thundervis.present.collectives import describe
from thundervis.recording import open_recording
from thundervis.recording.collectives import (ChainCall, collective_counts, collective_places, collectives,
                                              issuer_kind)

DDP_SCRIPT = textwrap.dedent("""\
    import json, sys
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)))

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    torch.manual_seed(0)
    model = DistributedDataParallel(M())
    run = model if "--eager" in sys.argv else torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(4):
        x = torch.randn(4, 8)
        loss = run(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # LINE_BACKWARD
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # LINE_ALL_REDUCE
        losses.append(mean.item())
    dist.destroy_process_group()
    json.dump(losses, open(sys.argv[1], "w"))
""")


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """A recorded in-process DDP run (one rank) and the losses of the same script run eagerly
    without thundervis. Returns (recording path, script path, compiled losses, eager losses)."""
    import runpy
    import sys
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("ddp")
    script = os.path.join(str(folder), "ddp_one_rank.py")
    with open(script, "w") as f:
        f.write(DDP_SCRIPT)
    compiled, eager = folder / "compiled.json", folder / "eager.json"
    out = check_output(os.path.join(str(folder), "ddp.tvrec"))
    result = run_target(script=script, module=None, args=[str(compiled)], out=out, executors=["torch"])
    assert result.exit_code == 0, result
    saved = sys.argv[:]
    try:
        sys.argv = [script, str(eager), "--eager"]
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.argv = saved
    return result.path, script, json.loads(compiled.read_text()), json.loads(eager.read_text())


def test_ddp_reducer_and_script_collectives_are_recorded_between_the_graphs(ddp_run):
    path, script, compiled, eager = ddp_run
    assert compiled == pytest.approx(eager, rel=1e-5, abs=1e-6)
    name = os.path.basename(script)
    with open_recording(path) as rec:
        graphs = rec.graphs()
        assert len(graphs) == 1 and not rec.failures()  # the watcher's own kernel is never compiled
        rows = collectives(rec)
        counts = collective_counts(rec, rows)
    reducer = [r for r in rows if r.issued_by == "backward"]
    script_calls = [r for r in rows if r.issued_by == "script"]
    # Steps 1 and 2 in full (a step: between two calls of the first chain, here graph 0 forward).
    assert [r.after for r in reducer] == [ChainCall(0, "backward", 1), ChainCall(0, "backward", 2)]
    assert [r.before for r in reducer] == [ChainCall(0, "forward", 2), ChainCall(0, "forward", 3)]
    for r in reducer:
        assert r.op == "all_reduce" and r.c10d_op == "allreduce_" and r.group_size == 1 and r.backend == "gloo"
        assert r.outputs == (((90,), "float32"),) and r.bytes == 90 * 4 and r.async_op
        assert r.source == f"{name}:{line_of(script, 'LINE_BACKWARD')}"
        assert r.duration_ms is not None and r.duration_ms >= 0
    assert [r.source for r in script_calls] == [f"{name}:{line_of(script, 'LINE_ALL_REDUCE')}"] * 2
    assert all(not r.async_op and r.outputs == (((), "float32"),) for r in script_calls)
    # DDP's construction broadcasts the parameters before any graph ran.
    first = [r for r in rows if r.after is None]
    assert first and all(r.step == 0 and r.before == ChainCall(0, "forward", 1) for r in first)
    assert any(r.op == "broadcast" and r.issuer.startswith("torch/distributed/") for r in first)
    assert [r.seq for r in rows] == sorted(r.seq for r in rows) and max(r.step for r in rows) == 2
    # Counts cover the whole run: 4 reducer all-reduces + 4 of the script.
    assert counts.complete and counts.by_op["all_reduce"] == 8 and counts.between_graphs > counts.recorded
    assert counts.recorded == len(rows) and counts.in_graphs_run == 0
    with open_recording(path) as rec:
        places = collective_places(rec)
    main = [p for p in places if p.after == (0, "backward") and p.before == (0, "forward") and p.op == "all_reduce"]
    assert main and main[0].count == 6  # the last step's come after the last backward, at the end


def test_ls_and_show_list_the_collectives(ddp_run, capsys):
    path, script, _, _ = ddp_run
    code, out, _ = run_cli(capsys, "ls", path, "--brief")
    assert code == 0
    assert "collectives  0 communication ops in the traces · " in out
    assert "between graph 0 backward and graph 0 forward: 6 × all_reduce" in out
    code, out, _ = run_cli(capsys, "show", path, "--chain", "backward", "--plain")
    assert code == 0 and out.startswith("# graph 0 · backward")
    block = out[out.index("# collectives run eagerly next to graph 0 backward"):]
    assert "# after call 1 (until graph 0 forward call 2):" in block
    assert "#   all_reduce · group of 1 · f32[90] · 360 B · " in block and "by backward (DDP reducer)" in block
    code, out, _ = run_cli(capsys, "show", path, "--chain", "forward", "--plain")
    assert "# before call 1 (since the start of the run):" in out and "broadcast · group of 1" in out
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    d = json.loads(out)["collectives"]
    assert d["in_traces"] == 0 and d["by_op"]["all_reduce"] == 8 and d["complete"]


def test_dot_draws_the_collectives_around_the_chain(ddp_run, capsys, tmp_path):
    path, _, _, _ = ddp_run
    out = tmp_path / "bw.dot"
    code, _, err = run_cli(capsys, "dot", path, "--chain", "backward", "-o", out)
    assert code == 0, err
    text = out.read_text()
    note = text[text.index("between_after [label="):]
    assert "run eagerly after this chain" in note and "all_reduce · group of 1 · f32[90]" in note
    assert "between_before" not in text  # nothing ran between the forward and this backward
    assert "communication" in text  # in the legend
    code, _, err = run_cli(capsys, "dot", path, "--chain", "forward", "-o", out)
    text = out.read_text()
    assert code == 0 and "between_before [label=" in text and "broadcast" in text


@pytest.fixture
def one_rank_group():
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def _events(notes, name):
    return [d for e, d in notes if e == name]


def test_watcher_places_counts_and_limits(one_rank_group):
    notes = []
    previous = chain_calls.set_listener(None)
    watcher = CollectiveWatcher(lambda e, d: notes.append((e, d)), full_steps=1, full_limit=3).start()
    try:
        t = torch.ones(4)
        dist.all_reduce(t)                      # step 0, before any chain
        chain_calls.started(0, "forward")       # step 1
        dist.all_reduce(t)                      # inside the chain: a traced op, counted only
        chain_calls.finished(0, "forward")
        work = dist.all_reduce(t, async_op=True)  # step 1, after forward call 1
        work.wait()
        dist.broadcast(t, 0)
        chain_calls.started(0, "forward")       # step 2: counted, not listed
        chain_calls.finished(0, "forward")
        dist.all_reduce(t)
        dist.barrier()
    finally:
        watcher.stop()
    assert chain_calls.set_listener(previous) is None  # the previous listener is back
    rows = _events(notes, "collective")
    assert [(r["op"], r["step"], r["async"]) for r in rows] == [("all_reduce", 0, False), ("all_reduce", 1, True),
                                                               ("broadcast", 1, False)]
    assert rows[0]["after"] is None and rows[0]["before"] == {"graph": 0, "chain": "forward", "call": 1}
    assert rows[1]["after"] == {"graph": 0, "chain": "forward", "call": 1}
    assert rows[1]["before"] == {"graph": 0, "chain": "forward", "call": 2}
    assert rows[1]["issuer"] == "script" and rows[1]["source"].startswith("test_collective_watch.py:")
    assert all(r["duration_ms"] is not None for r in rows)
    (summary,) = _events(notes, "collective_summary")
    assert summary["between_graphs"] == 5 and summary["recorded"] == 3 and summary["steps"] == 2
    assert summary["in_graphs"] == [{"graph": 0, "chain": "forward", "op": "all_reduce", "count": 1}]
    ops = {(o["op"], o["group_size"]): o["count"] for o in summary["by_op"]}
    assert ops == {("all_reduce", 1): 3, ("broadcast", 1): 1, ("barrier", 1): 1}
    at_end = [p for p in summary["places"] if p["before"] is None]
    assert {p["op"]: p["count"] for p in at_end} == {"all_reduce": 1, "barrier": 1}
    # Stopped: the kernels are gone; collectives run as before and nothing more is noted.
    assert "Autograd" not in torch._C._dispatch_dump("c10d::allreduce_")
    n = len(notes)
    dist.all_reduce(torch.ones(2))
    assert len(notes) == n


def test_a_row_is_written_by_the_second_chain_call_after_it_even_if_its_work_never_completes(one_rank_group):
    notes = []
    watcher = CollectiveWatcher(lambda e, d: notes.append((e, d))).start()
    try:
        # gloo's reduce-scatter work has a future that never completes (no duration).
        dist.reduce_scatter_single(torch.empty(4), torch.ones(4))
        for _ in range(2):
            chain_calls.started(0, "forward")
            chain_calls.finished(0, "forward")
        rows = _events(notes, "collective")
        assert [r["op"] for r in rows] == ["reduce_scatter"]  # before the run ends
        assert rows[0]["before"] == {"graph": 0, "chain": "forward", "call": 1} and "_placed" not in rows[0]
    finally:
        watcher.stop()


def test_dynamo_never_compiles_the_watchers_kernel(one_rank_group):
    """A collective in the eager part of a compiled function (after a graph break) runs the watcher's
    Python kernel; Dynamo, whose frame hook is active there, must not compile it into graphs."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        y = torch.sin(x)
        torch._dynamo.graph_break()
        dist.all_reduce(y)
        return torch.cos(y)

    def count(watch: bool) -> int:
        torch._dynamo.reset()
        graphs.clear()
        notes = []
        watcher = CollectiveWatcher(lambda e, d: notes.append((e, d))).start() if watch else None
        try:
            torch.compile(f, backend=backend)(torch.ones(3))
        finally:
            if watcher:
                watcher.stop()
        return len(graphs)
    assert count(True) == count(False)


def test_a_watcher_that_cannot_start_leaves_no_kernel_and_the_run_goes_on(monkeypatch, tmp_path):
    import thundervis.collective_watch as watch
    real, made = watch.CollectiveWatcher._kernel, []

    def kernel(self, op, info):
        if len(made) == 3:
            raise RuntimeError("this torch has other c10d ops")
        made.append(op)
        return real(self, op, info)
    monkeypatch.setattr(watch.CollectiveWatcher, "_kernel", kernel)
    with pytest.raises(RuntimeError):
        CollectiveWatcher(lambda e, d: None).start()
    assert len(made) == 3 and all("Autograd" not in torch._C._dispatch_dump(op.name()) for op in made)
    from thundervis.runner import check_output, run_target
    script = tmp_path / "plain.py"
    script.write_text("import torch\nprint(torch.compile(lambda x: x + 1)(torch.ones(2)))\n")
    made.clear()
    result = run_target(script=str(script), module=None, args=[], out=check_output(str(tmp_path / "p.tvrec")),
                        executors=["torch"])
    assert result.exit_code == 0
    with open_recording(result.path) as rec:
        (failed,) = rec.events("collective_watch_failed")
        assert "other c10d ops" in failed.data["error"] and rec.graphs()
    assert chain_calls.set_listener(None) is None


def test_collective_names():
    assert collective_name("_allgather_base_") == "all_gather"
    assert collective_name("_reduce_scatter_base_") == "reduce_scatter"
    assert collective_name("allreduce_coalesced_") == "all_reduce_coalesced"
    assert collective_name("allgather_into_tensor_coalesced_") == "all_gather_coalesced"
    assert collective_name("barrier") == "barrier" and collective_name("alltoall_base_") == "all_to_all"
    assert issuer_kind("torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:3 f") == "fsdp"
    assert issuer_kind("torch/nn/parallel/distributed.py:1 _pre_forward") == "ddp"
    assert issuer_kind("torch/autograd/graph.py:979 _engine_run_backward") == "backward"
    assert issuer_kind("script") == "script" and issuer_kind(None) == "torch"


def test_rows_from_a_tampered_recording_are_checked(tmp_path, capsys):
    from thundervis.recording import RecordingObserver
    path = str(tmp_path / "t.tvrec")
    obs = RecordingObserver(path)
    obs.start_run(script="x.py", module=None, argv=["x.py"], cwd=str(tmp_path))
    obs.note("collective", {"seq": "zero", "op": "all_reduce"})           # no usable seq: dropped
    obs.note("collective", ["not", "a", "dict"])
    obs.note("collective", {"seq": 1, "op": "all_reduce\x1b[31m", "inputs": [[[2, "x"], "f32"]],
                            "outputs": [[[2], "float32"]], "bytes": "many", "step": True,
                            "after": {"graph": 0, "chain": "forward", "call": 1}, "before": {"graph": "0"},
                            "issuer": "script", "source": "x.py:3\x07"})
    obs.note("collective_summary", {"between_graphs": 7, "by_op": [{"op": "all_reduce", "count": 7}, 3]})
    obs.finish_run("ok", 0)
    obs.close()
    with open_recording(path) as rec:
        (row,) = collectives(rec)
        counts = collective_counts(rec)
    assert row.inputs == () and row.outputs == (((2,), "float32"),) and row.bytes == 0 and row.step == 0
    assert row.after == ChainCall(0, "forward", 1) and row.before is None
    assert "all_reduce\x1b[31m" in describe(row)
    assert counts.between_graphs == 7 and counts.by_op == {"all_reduce": 7} and counts.complete
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert "7 collectives run between compiled graphs" in out


FSDP_WORKER = textwrap.dedent("""\
    import json, sys
    import torch, torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from thundervis.collective_watch import CollectiveWatcher

    def main(rank, store_path, out):
        dist.init_process_group("gloo", rank=rank, world_size=2, store=dist.FileStore(store_path, 2))
        notes = []
        watcher = CollectiveWatcher(lambda e, d: notes.append((e, d))).start()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        model(torch.randn(3, 4)).sum().backward()
        watcher.stop()
        dist.barrier()
        dist.destroy_process_group()
        if rank == 0:
            with open(out, "w") as f:
                json.dump(notes, f)
        # torch's gloo/FSDP2 teardown at interpreter exit aborts a process now and then ("terminate
        # called without an active exception", ~3% of runs, with or without the watcher): the
        # test's work is done and written, so the worker leaves without it.
        import os
        os._exit(0)

    if __name__ == "__main__":
        import torch.multiprocessing as mp
        mp.spawn(main, args=(sys.argv[1], sys.argv[2]), nprocs=2)
""")


@pytest.mark.slow
def test_fsdp2_all_gathers_and_reduce_scatters_are_recorded(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "fsdp_worker.py"
    script.write_text(FSDP_WORKER)
    out = tmp_path / "notes.json"
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "store"), str(out)], capture_output=True,
                       text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [d for e, d in json.loads(out.read_text()) if e == "collective"]
    fsdp = [r for r in rows if issuer_kind(r["issuer"]) == "fsdp"]
    # Forward: one all-gather per layer; backward: the layers gathered again, then one
    # reduce-scatter per layer; each on the group of 2 with the layer's flat parameters.
    assert [r["op"] for r in fsdp].count("all_gather") >= 2
    scatters = [r for r in fsdp if r["op"] == "reduce_scatter"]
    assert [r["inputs"][0][0] for r in scatters] == [[10], [20]]  # fc2 (8 + 2), then fc1 (16 + 4)
    assert all(r["group_size"] == 2 and r["outputs"][0][0] == [r["inputs"][0][0][0] // 2] for r in scatters)
