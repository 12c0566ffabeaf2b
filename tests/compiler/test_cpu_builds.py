"""Hot CPU regions compile with Inductor off the training thread (a worker process): the region
keeps running through torch until the code is back, then both paths alternate, timed, and the
lower median stays; the timings are reported. The worker rebuilds a region only through the
validating loader, and the live status line names the regions building."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from thundervis.compiler.executors import cpu_builds, cpu_path
from thundervis.compiler.executors.cpu_build_worker import build
from thundervis.compiler.ir import BoundSymbol, TensorProxy
from thundervis.compiler.observer import CompileObserver, compiling


def _region(n: int = 64):
    a = TensorProxy("a", (n, n), "float32", "cpu", (n, 1))
    t0 = TensorProxy("t0", (n, n), "float32", "cpu", (n, 1))
    t1 = TensorProxy("t1", (n, n), "float32", "cpu", (n, 1))
    mul = BoundSymbol("prims.mul", (a, 2.0), {}, t0, "m0", aten="aten.mul.Tensor")
    th = BoundSymbol("prims.tanh", (t0,), {}, t1, "m1", aten="aten.tanh.default")
    return BoundSymbol("triton_fusion_0", (a,), {}, (t1,), "f0", subsymbols=(mul, th), executor="triton")


@pytest.fixture(autouse=True)
def _warm_ups(monkeypatch, request):
    """The warm-up requests made (a real worker compiling in the background only for slow tests)."""
    asked = []
    if "slow" not in request.keywords:
        monkeypatch.setattr(cpu_builds, "warm_up", lambda: asked.append(1))
    return asked


class _FakeBuild(cpu_builds.Build):
    def __init__(self):
        super().__init__(0)


class Events(CompileObserver):
    def __init__(self):
        self.events = []

    def runtime(self, graph, chain, event, data):
        self.events.append((event, dict(data)))


def test_a_hot_region_keeps_torch_while_building_then_alternates_and_keeps_the_lower_median(monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "2")
    pending = _FakeBuild()
    sent = []
    monkeypatch.setattr(cpu_builds, "submit", lambda request: sent.append(request) or pending)
    inductor_calls = []

    def fast(a):
        inductor_calls.append(a)
        return [torch.tanh(a * 2)]
    obs = Events()
    with compiling(obs, 0, "forward"):
        region = cpu_path.CpuRegion(_region())
    x = torch.randn(64, 64)
    for _ in range(3):  # the first (timed) call, then hot: sent to the worker, no waiting
        region(x)
    assert len(sent) == 1
    request = sent[0]()  # serialized on the build writer thread in a real run
    assert request["args"][0]["shape"] == [64, 64] and request["region"]["symbols"][0]["sym"] == "triton_fusion_0"
    for _ in range(5):  # still compiling: torch runs it
        torch.testing.assert_close(region(x)[0], torch.tanh(x * 2))
    assert not inductor_calls and region._pending
    monkeypatch.setattr(cpu_builds, "load", lambda b: fast)  # loaded on the worker's reader thread
    pending._answer({"path": "/nowhere", "seconds": 1.5, "priority": "SCHED_IDLE"})
    calls = 0
    while region._pending:
        out = region(x)
        assert isinstance(out, tuple)
        torch.testing.assert_close(out[0], torch.tanh(x * 2))
        calls += 1
        assert calls < 50
    # the call that loads the build runs torch; then a warm-up and 5 calls of each path, alternated
    assert len(inductor_calls) == cpu_path._MEASURED_CALLS + 1 and calls == 2 * cpu_path._MEASURED_CALLS + 2
    final = [d for e, d in obs.events if e == "kernel_path"][-1]
    samples = final["samples_us"]
    assert len(samples["torch"]) == len(samples["inductor"]) == cpu_path._MEASURED_CALLS
    import statistics
    assert final["torch_us"] == round(statistics.median(samples["torch"]), 2)
    assert final["via"] == ("inductor" if final["inductor_us"] < final["torch_us"] else "torch")
    assert final["build_s"] == 1.5 and "alternated calls" in final["why"]
    builds = [d for e, d in obs.events if e == "cpu_build"]
    assert [d["state"] for d in builds] == ["building", "built"]
    # the facts behind building on idle time only, and what the worker ran at, are recorded
    assert builds[0]["cores"] >= 1 and builds[0]["training_threads"] == torch.get_num_threads()
    assert builds[1]["priority"] == "SCHED_IDLE" and builds[1]["build_s"] == 1.5
    assert any("on idle CPU time only" in d["why"] for e, d in obs.events if e == "kernel_path")


def test_a_failed_build_leaves_torch_with_the_reason(monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "1")
    failed = _FakeBuild()
    failed._answer({"error": "CppCompileError: no compiler"})
    monkeypatch.setattr(cpu_builds, "submit", lambda request: failed)
    region = cpu_path.CpuRegion(_region())
    x = torch.randn(64, 64)
    for _ in range(4):
        torch.testing.assert_close(region(x)[0], torch.tanh(x * 2))
    assert not region._pending and region.via == "torch"
    assert region.why == "inductor failed: CppCompileError: no compiler"


def test_the_worker_refuses_a_region_outside_the_allow_list():
    request = cpu_builds.region_request(_region(), list(_region().subsymbols), (torch.randn(64, 64),))()
    request["region"]["symbols"][0]["subsymbols"][0]["sym"] = "os.system"
    with pytest.raises(Exception) as e:
        build(dict(request, out="/nonexistent"))
    assert "os.system" in str(e.value)


def test_the_status_line_names_the_regions_building():
    from thundervis.progress import ProgressLine
    stream = io.StringIO()
    line = ProgressLine(stream)
    for k in ("f0", "f1", "f2"):
        line.runtime(0, "forward", "cpu_build", {"kernel": k, "state": "building"})
    assert stream.getvalue().endswith("thundervis: graph 0 · forward · 3 regions building for the CPU")
    line.runtime(0, "forward", "cpu_build", {"kernel": "f0", "state": "built"})
    assert stream.getvalue().endswith("2 regions building for the CPU")
    for k in ("f1", "f2"):
        line.runtime(0, "forward", "cpu_build", {"kernel": k, "state": "failed"})
    assert stream.getvalue().endswith("\r\x1b[2K")
    # no core spare beside the training's threads: the builds wait for idle time, and it says so
    line.runtime(0, "forward", "cpu_build", {"kernel": "f3", "state": "building", "cores": 2, "training_threads": 2})
    assert stream.getvalue().endswith("1 region building for the CPU (idle time only)")
    line.runtime(0, "forward", "cpu_build", {"kernel": "f4", "state": "building", "cores": 8, "training_threads": 4})
    assert stream.getvalue().endswith("2 regions building for the CPU")


@pytest.mark.slow
def test_a_region_built_by_the_worker_process_runs_and_matches_torch(monkeypatch):
    """The real worker: Inductor compiles the region in another process; loaded here, it matches."""
    x = torch.randn(64, 64)
    region = _region()
    b = cpu_builds.submit(cpu_builds.region_request(region, list(region.subsymbols), (x,)))
    t0 = time.perf_counter()
    assert b.wait(600), "the worker did not answer"
    assert b.error is None, b.error
    assert b.seconds > 0 and time.perf_counter() - t0 >= 0
    assert isinstance(b.fn, cpu_builds.LoadedRegion)  # loaded by the reader thread before ready()
    torch.testing.assert_close(b.fn(x)[0], torch.tanh(x * 2))
    assert b.path == b.expected and b.path.endswith("/region.so")
    # A fresh process loads it without importing any of Inductor (its import is what stalled steps).
    probe = ("import sys, torch\n"
             "from thundervis.compiler.executors import cpu_builds\n"
             f"b = cpu_builds.Build(0, {b.path!r}, {b.inputs!r})\n"  # dtypes print as torch.float32
             "b.path = b.expected\n"
             "fn = cpu_builds.load(b)\n"
             "x = torch.randn(64, 64)\n"
             "torch.testing.assert_close(fn(x)[0], torch.tanh(x * 2))\n"
             "print(sorted(m for m in sys.modules if m.startswith('torch._inductor')))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_a_build_whose_code_does_not_load_is_an_error(monkeypatch):
    def broken(b):
        raise OSError("cannot open shared object")
    monkeypatch.setattr(cpu_builds, "load", broken)
    b = _FakeBuild()
    b._answer({"path": "/nowhere", "seconds": 1.0})
    assert b.ready() and b.fn is None
    assert b.error == "loading the built code failed: OSError: cannot open shared object"


def _answered(tmp_path, make_file=None, path=None):
    """A build whose worker answered with ``<tmp>/region0/region.so`` (written by ``make_file``)."""
    so = tmp_path / "region0" / "region.so"
    so.parent.mkdir(mode=0o700)
    if make_file is not None:
        make_file(so)
    b = cpu_builds.Build(0, str(so), (((64, 64), (64, 1), 0, torch.float32),))
    b._answer({"path": str(path or so), "seconds": 1.0})
    return b


def test_a_missing_built_file_is_an_error_not_an_exception(tmp_path):
    b = _answered(tmp_path)
    assert b.ready() and b.fn is None
    assert b.error.startswith("loading the built code failed: FileNotFoundError")


def test_a_corrupt_built_file_is_an_error_not_an_exception(tmp_path):
    def garbage(so):
        so.write_bytes(b"\x7fELF not really a shared library")
        so.chmod(0o700)
    b = _answered(tmp_path, garbage)
    assert b.ready() and b.fn is None and b.error.startswith("loading the built code failed: ")


def test_only_the_requested_file_of_our_folder_is_loaded(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(torch._C._aoti, "AOTIModelContainerRunnerCpu", lambda path, n: opened.append(path))
    elsewhere = tmp_path / "elsewhere.so"
    elsewhere.write_bytes(b"")
    b = _answered(tmp_path, path=elsewhere)  # the worker names another file: never opened
    assert b.error == "the build worker answered with a file outside its own folder"

    def link(so):
        so.symlink_to(elsewhere)
    (tmp_path / "a").mkdir()
    assert "not a regular file" in _answered(tmp_path / "a", link).error

    def shared(so):
        so.write_bytes(b"")
        so.chmod(0o666)  # writable by others: someone may have swapped it
    (tmp_path / "b").mkdir()
    assert "not a regular file of this user's alone" in _answered(tmp_path / "b", shared).error
    assert opened == []


def test_a_built_region_whose_code_does_not_load_stays_on_torch_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "1")
    missing = _answered(tmp_path)  # the real load, of a file that is not there
    monkeypatch.setattr(cpu_builds, "submit", lambda request: missing)
    obs = Events()
    with compiling(obs, 0, "forward"):
        region = cpu_path.CpuRegion(_region())
    x = torch.randn(64, 64)
    for _ in range(4):
        torch.testing.assert_close(region(x)[0], torch.tanh(x * 2))
    assert not region._pending and region.via == "torch"
    assert region.why.startswith("inductor failed: loading the built code failed: FileNotFoundError")
    assert [d["state"] for e, d in obs.events if e == "cpu_build"] == ["building", "failed"]
    assert [d for e, d in obs.events if e == "kernel_path"][-1]["why"] == region.why


def test_inputs_unlike_those_built_for_run_through_torch(monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "1")
    x = torch.randn(64, 64)
    ran = []
    built = cpu_builds.LoadedRegion(lambda args: ran.append(args) or [torch.tanh(args[0] * 2)],
                                    cpu_builds.region_request(_region(), [], (x,)).inputs)
    assert built.accepts((x,)) and not built.accepts((x.t(),)) and not built.accepts((x.double(),))
    assert not built.accepts((x, x)) and not built.accepts((torch.randn(65, 64)[1:],))
    b = _FakeBuild()
    monkeypatch.setattr(cpu_builds, "load", lambda _: built)
    b._answer({"path": "/nowhere", "seconds": 1.0})
    monkeypatch.setattr(cpu_builds, "submit", lambda request: b)
    region = cpu_path.CpuRegion(_region())
    calls = 0
    while region._candidate is None:  # the first call, the one sending it, the one taking it
        region(x)
        calls += 1
        assert calls < 10
    y = torch.randn(64, 64).t()  # another stride: the built code would read it wrongly
    torch.testing.assert_close(region._candidate(y)[0], torch.tanh(y * 2))
    assert ran == []
    torch.testing.assert_close(region._candidate(x)[0], torch.tanh(x * 2))
    assert len(ran) == 1


def test_the_worker_warms_up_when_a_region_qualifies_not_before(monkeypatch, _warm_ups):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "1e9")
    cpu_path.CpuRegion(_region())(torch.randn(64, 64))  # below the threshold: no worker
    assert _warm_ups == []
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    region = cpu_path.CpuRegion(_region())
    region(torch.randn(64, 64))  # qualifies: its build comes after N calls, the worker warms up now
    assert _warm_ups == [1] and region._pending and region._build is None


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
@pytest.mark.parametrize("serving", [False, True], ids=["while starting", "while serving"])
def test_a_worker_whose_training_process_is_killed_ends_with_its_compilers_and_folder(serving):
    """SIGTERM skips the training process's atexit close; a process it started (a data loader's
    worker) still holds the worker's stdin open, so only the worker's own watch can end it."""
    script = ("import subprocess, time\n"
              "from thundervis.compiler.executors import cpu_builds\n"
              "w = cpu_builds._get_worker()\n"
              "holder = subprocess.Popen(['sleep', '300'], pass_fds=(w.proc.stdin.fileno(),))\n"
              # a request it answers at once (with an error): the worker is up and reading
              + ("assert cpu_builds.submit(lambda: {'region': {}, 'args': []}).wait(120)\n" if serving else "")
              + "print(w.proc.pid, holder.pid, w.folder, flush=True)\n"
              "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = holder = None
    try:
        worker, holder, folder = parent.stdout.readline().split()
        worker, holder = int(worker), int(holder)
        assert os.path.isdir(folder)
        parent.send_signal(signal.SIGTERM)  # at once: the worker may still be starting
        assert parent.wait(30) == -signal.SIGTERM
        deadline = time.monotonic() + 60
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker), "the orphaned worker kept running"
        assert not os.path.exists(folder)
    finally:
        parent.kill()
        parent.wait()
        for pid in (holder, worker):
            if pid is not None and not _gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="reads /proc")
def test_the_worker_reuses_no_shared_cache_whatever_the_users_environment_says(monkeypatch):
    for name in cpu_builds.REMOTE_CACHES:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/a-shared-cache")
    w = cpu_builds._Worker()
    try:
        with open(f"/proc/{w.proc.pid}/environ", "rb") as f:
            env = dict(v.decode().split("=", 1) for v in f.read().split(b"\0") if b"=" in v)
    finally:
        w.close()
    assert all(env[name] == "0" for name in cpu_builds.REMOTE_CACHES)
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(w.folder + os.sep)
    assert env["TMPDIR"].startswith(w.folder + os.sep)  # Inductor's precompiled headers go there
    assert env[cpu_builds.PARENT_ENV] == str(os.getpid()) and env[cpu_builds.FOLDER_ENV] == w.folder


def test_the_worker_imports_nothing_from_the_trainings_working_directory(tmp_path, monkeypatch):
    """``python -m`` puts the working directory first on the import path: a ``json.py`` of the
    user's next to their script must not replace the one the worker reads its requests with."""
    (tmp_path / "json.py").write_text("raise SystemExit('the user json.py was imported')\n")
    monkeypatch.chdir(tmp_path)
    w = cpu_builds._Worker()
    try:
        cwd = os.readlink(f"/proc/{w.proc.pid}/cwd")
        w.proc.stdin.write("not json\n")  # answered (an error line) only if the real json module loaded
        w.proc.stdin.flush()
        time.sleep(0.5)
        alive = w.proc.poll() is None
    finally:
        w.close()
    assert cwd == w.folder and alive


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or not os.path.exists("/proc/self/stat"), reason="Linux only")
def test_the_worker_is_a_background_job_of_the_trainings_own_session():
    """SCHED_IDLE only yields to processes of the same scheduling group: under autogroup (one group
    per session) a worker in a session of its own took half a busy core from the training. It
    stays in ours, in a process group of its own (closing it ends its compilers, not us)."""
    w = cpu_builds._Worker()
    try:  # an answer (an error) proves it is past its start-up, where it drops its priority
        assert w.submit(lambda: {"region": {}, "args": []}).wait(120)
        pid = w.proc.pid
        assert os.getsid(pid) == os.getsid(0)
        assert os.getpgid(pid) == pid != os.getpgid(0)
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        # The scheduling group is the cgroup, and within the root cgroup the autogroup. A task in a
        # container's cgroup is in no autogroup: the kernel then prints an empty autogroup file.
        with open("/proc/self/cgroup") as ours, open(f"/proc/{pid}/cgroup") as its:
            assert its.read() == ours.read()
        if os.path.exists("/proc/self/autogroup"):
            with open("/proc/self/autogroup") as ours, open(f"/proc/{pid}/autogroup") as its:
                assert its.read().split()[:1] == ours.read().split()[:1]
    finally:
        w.close()
    deadline = time.monotonic() + 10  # SIGKILLed by close: gone within moments, not at once
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)
