"""``thundervis run --nproc-per-node 2``: real torchrun jobs on CPU (gloo), one recording per rank.

Slow: each test launches 2 worker processes that compile under the Triton interpreter."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from thundervis.present.default_view import pick_chain, pick_pass
from thundervis.recording import open_recording
from thundervis.recording.collectives import collectives
from thundervis.recording.group import open_group

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_distributed.py")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    # gloo on the loopback interface only (127.0.0.1), whatever the host name resolves to.
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    env.pop("RANK", None)
    return env


def _descendants(pid: int) -> list:
    """Return the pids of every process below ``pid`` (Linux ``/proc``; empty where it cannot tell)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                found += kids
                todo += kids
        except (OSError, ValueError):
            continue
    return found


def _run_job(make_cmd, timeout, before_retry=None):
    """Run a torchrun job; once, retry it when it hangs. Plain torchrun with gloo on CPU (no
    thundervis involved) sometimes hangs with both workers done, at interpreter exit (a DDP
    worker: its Reducer drops the last reference to the gloo process group, whose destructor joins
    gloo's threads with the GIL held while one of them needs the GIL to free a tensor). The hang is
    killed, the launcher's process group and every worker (torchrun starts each worker in a session
    of its own, which killing the launcher's group leaves running, holding the output pipes), and
    the job run again on a fresh port."""
    for attempt in (0, 1):
        proc = subprocess.Popen(make_cmd(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(), cwd=ROOT, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            workers = _descendants(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.communicate(timeout=60)
            if attempt or before_retry is None:
                raise
            before_retry()


def test_a_hung_job_is_killed_with_workers_in_sessions_of_their_own(tmp_path):
    """Like torchrun's workers, the grandchild runs in a session of its own and holds the pipes: a
    hang must still end, with every process of the job killed."""
    pid_file = tmp_path / "worker.pid"
    launcher = ("import subprocess, sys, time; "
                "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True); "
                f"open({str(pid_file)!r}, 'w').write(str(w.pid)); time.sleep(600)")
    t0 = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        _run_job(lambda: [sys.executable, "-c", launcher], timeout=5)
    assert time.time() - t0 < 60
    worker = int(pid_file.read_text())
    for _ in range(50):
        try:
            with open(f"/proc/{worker}/stat") as f:
                if f.read().rsplit(") ", 1)[1].startswith("Z"):
                    break  # killed, waiting for init to reap it
        except OSError:
            break  # gone
        time.sleep(0.1)
    else:
        raise AssertionError(f"worker {worker} still runs")


def _thundervis_run(group, *target, timeout=300):
    import shutil
    return _run_job(lambda: [sys.executable, "-m", "thundervis", "run", "--nproc-per-node", "2",
                             "--master-addr", "127.0.0.1", "--master-port", str(_port()), "--out", str(group),
                             *map(str, target)],
                    timeout, lambda: shutil.rmtree(group, ignore_errors=True))


def _eager_torchrun(*target, timeout=180):
    return _run_job(lambda: [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                             "--master-addr", "127.0.0.1", "--master-port", str(_port()), *map(str, target)],
                    timeout, lambda: None)


@pytest.mark.parametrize("mode,extra", [("ddp", []), ("ddp", ["--compiled-autograd"]), ("fsdp", [])],
                         ids=["ddp", "ddp-compiled-autograd", "fsdp"])
def test_two_process_training_records_every_rank_and_matches_eager(tmp_path, mode, extra):
    group = tmp_path / f"{mode}.tvgroup"
    compiled, eager = tmp_path / "compiled.json", tmp_path / "eager.json"
    r = _thundervis_run(group, EXAMPLE, "--mode", mode, "--steps", "2", "--losses", compiled, *extra)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    e = _eager_torchrun(EXAMPLE, "--mode", mode, "--steps", "2", "--eager", "--losses", eager)
    assert e.returncode == 0, e.stderr[-3000:]
    assert json.loads(compiled.read_text()) == pytest.approx(json.loads(eager.read_text()), rel=1e-5, abs=1e-6)
    assert "one recording per rank written to" in r.stdout and "identical on every rank" in r.stdout
    ov = open_group(str(group)).overview()
    assert ov.status == "ok" and ov.world_size == 2 and [x.rank for x in ov.ranks] == [0, 1]
    assert ov.identical and not ov.absent
    for rank in ov.ranks:
        assert rank.status == "ok" and rank.n_graphs >= 1 and not rank.missing
        # DDP's gradient all-reduces are graph ops only when compiled autograd traces the python
        # reducer; DDP's C++ reducer and FSDP2's hooks (dynamo-disabled in torch 2.13) run them
        # between our graphs, where the collective watcher records them (docs/distributed.md).
        if extra:
            assert rank.n_communication >= 2, rank
        else:
            assert rank.n_communication == 0, rank
        # Every step's loss all-reduce of the script runs between graphs, whatever the mode.
        assert rank.n_collectives_between >= 2, rank
        with open_recording(rank.path) as rec:
            chains = {c.kind: c.status for g in rec.graphs() for c in g.chains}
            assert chains.get("forward") == "compiled", chains
            assert chains.get("backward" if not extra else "inference") == "compiled", chains
            assert not rec.failures(), rec.failures()
            assert rec.pass_text(pick_pass(rec.graphs())[2].ref).startswith("# graph ")  # packed, still readable
            rows = collectives(rec)
        _check_collectives_between_graphs(mode, extra, rows)
    ls = subprocess.run([sys.executable, "-m", "thundervis", "ls", str(group)], capture_output=True, text=True,
                        env=_env())
    assert ls.returncode == 0 and "comm in/between" in ls.stdout, ls.stdout + ls.stderr
    assert f"{ov.ranks[1].n_communication}/{ov.ranks[1].n_collectives_between}" in ls.stdout
    if not extra:
        chain = "backward" if mode == "ddp" else "forward"
        show = subprocess.run([sys.executable, "-m", "thundervis", "show", str(group), "--rank", "1", "--chain", chain,
                               "--plain"], capture_output=True, text=True, env=_env())
        assert show.returncode == 0, show.stderr
        block = show.stdout[show.stdout.index("# collectives run eagerly next to graph 0 " + chain):]
        assert ("by backward (DDP reducer)" if mode == "ddp" else "all_gather · group of 2") in block, block
    assert os.path.exists(group / "traces.tvstore")
    launch = ov.launches[0]
    assert launch.status == "ok" and "--nproc-per-node" in launch.torchrun_args


def _check_collectives_between_graphs(mode, extra, rows):
    """The collectives a rank ran between its compiled graphs, for each way of training the example."""
    def ran(op, issued_by):
        return [r for r in rows if r.op == op and r.issued_by == issued_by and r.group_size == 2]
    losses = ran("all_reduce", "script")
    assert len(losses) == 2 and all(r.after is not None for r in losses), rows  # one per step
    if mode == "ddp" and not extra:
        # DDP's C++ reducer: one all-reduce of the gradient bucket per backward, after a compiled
        # backward call and before the next forward (or the end).
        grads = ran("all_reduce", "backward")
        assert len(grads) == 2 and all(r.after.chain == "backward" for r in grads), rows
        assert all(r.outputs[0][1] == "float32" and r.bytes > 1000 for r in grads), grads
    elif mode == "ddp":
        # Compiled autograd traces the python reducer: no gradient all-reduce outside the graphs.
        assert not ran("all_reduce", "backward"), rows
    else:
        # FSDP2's hooks: all-gathers in the forward and backward, reduce-scatters in the backward.
        gathers, scatters = ran("all_gather", "fsdp"), ran("reduce_scatter", "fsdp")
        assert len(gathers) >= 6 and len(scatters) >= 6, rows
        assert all(r.outputs[0][0][0] == 2 * r.inputs[0][0][0] for r in gathers), gathers
        assert any(r.after is not None and r.after.chain == "forward" for r in gathers), gathers


COLLECTIVES = """
import torch, torch.distributed as dist
import torch.distributed._functional_collectives as funcol
dist.init_process_group("gloo")
torch.manual_seed(0)
w = torch.randn(8, 8, requires_grad=True)

def step(x):
    h = torch.tanh(x @ w) * 2
    h = funcol.all_reduce(h, "sum", dist.group.WORLD)
    return (torch.sin(h) + 1).sum()

f = torch.compile(step)
for i in range(2):
    loss = f(torch.randn(4, 8) + dist.get_rank())
    loss.backward()
    ref = step(torch.randn(4, 8))
dist.barrier()
dist.destroy_process_group()
"""


def test_collectives_traced_into_graphs_show_in_every_rank(tmp_path):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    group = tmp_path / "c.tvgroup"
    r = _thundervis_run(group, script)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ov = open_group(str(group)).overview()
    assert ov.status == "ok" and ov.identical
    for rank in ov.ranks:
        assert rank.n_communication == 4  # all_reduce + wait_tensor, forward and backward
    out = subprocess.run([sys.executable, "-m", "thundervis", "show", str(group), "--rank", "1", "--plain"],
                         capture_output=True, text=True, env=_env())
    assert "_c10d_functional.all_reduce.default" in out.stdout and "_c10d_functional.wait_tensor" in out.stdout
    d = subprocess.run([sys.executable, "-m", "thundervis", "diff", "--ranks", str(group)],
                       capture_output=True, text=True, env=_env())
    assert d.returncode == 0 and "identical on all 2 ranks" in d.stdout
    dot = subprocess.run([sys.executable, "-m", "thundervis", "dot", str(group), "-o", str(tmp_path / "g.dot")],
                         capture_output=True, text=True, env=_env())
    assert dot.returncode == 0, dot.stderr
    assert "communication" in (tmp_path / "g.dot").read_text()


TARGETED = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
f = torch.compile(lambda x: (torch.tanh(x) * 2 + 1).sum(-1))
for i in range(2):
    f(torch.randn(4, 64) + dist.get_rank())
dist.barrier()
dist.destroy_process_group()
"""


def test_every_rank_takes_the_gpu_target(tmp_path):
    """``--target sm_90`` reaches every rank: each rank's recording holds an sm_90 build of every
    Triton kernel it generated, like a single-process run."""
    script = tmp_path / "targeted.py"
    script.write_text(TARGETED)
    group = tmp_path / "t.tvgroup"
    r = _thundervis_run(group, "--target", "sm_90", script)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ov = open_group(str(group)).overview()
    assert ov.status == "ok" and [x.rank for x in ov.ranks] == [0, 1]
    for rank in ov.ranks:
        with open_recording(rank.path) as rec:
            triton = [k for k in rec.kernels() if k.executor == "triton"]
            builds = rec.kernel_builds()
            assert triton and {(b.kernel, b.target, b.status) for b in builds} == \
                {(k.name, "sm_90", "ok") for k in triton}, [(b.kernel, b.status, b.error) for b in builds]


def test_a_bad_target_stops_the_job_before_any_worker(tmp_path):
    group = tmp_path / "bad.tvgroup"
    r = subprocess.run([sys.executable, "-m", "thundervis", "run", "--nproc-per-node", "2", "--target", "sm_1",
                        "--out", str(group), EXAMPLE], capture_output=True, text=True, env=_env(), cwd=ROOT)
    assert r.returncode == 2 and "--target" in r.stderr and "Traceback" not in r.stderr
    assert not group.exists()


def test_a_killed_rank_leaves_both_recordings_readable_and_the_group_failed(tmp_path):
    group = tmp_path / "k.tvgroup"
    ready = tmp_path / "ready"
    cmd = [sys.executable, "-m", "thundervis", "run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(_port()), "--out", str(group), EXAMPLE, "--steps", "3",
           "--stall-rank", "1", "--ready", str(ready)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    try:
        deadline = time.time() + 480
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "rank 1 never got to its stall"
            time.sleep(0.5)
        with open_recording(str(group / "rank-00001.tvrec")) as rec:
            pid = rec.run().pid
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "the job failed" in out and "rank 1" in out, out + err[-2000:]
    ov = open_group(str(group)).overview()
    assert ov.status == "failed"
    assert any(f.get("rank") == 1 and f.get("signal") == "SIGKILL" for f in ov.launches[0].failures), ov.launches
    statuses = {r.rank: r.status for r in ov.ranks}
    assert statuses[1] == "killed" and statuses[0] in ("interrupted", "failed", "killed"), statuses
    for rank in ov.ranks:
        with open_recording(rank.path) as rec:  # both readable, whatever became of them
            g, c, p = pick_pass(rec.graphs())
            assert rec.pass_text(p.ref).startswith("# graph ")
    ls = subprocess.run([sys.executable, "-m", "thundervis", "ls", str(group)], capture_output=True, text=True,
                        env=_env())
    assert ls.returncode == 0 and "status  failed" in ls.stdout and "killed" in ls.stdout
