"""Hot CPU regions compile with Inductor off the training thread (a worker process): the region
keeps running through torch until the code is back, then both paths alternate, timed, and the
lower median stays; the timings are reported. The worker rebuilds a region only through the
validating loader, and the live status line names the regions building."""
from __future__ import annotations

import io
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
    pending._answer({"path": "/nowhere", "seconds": 1.5})
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
    states = [d["state"] for e, d in obs.events if e == "cpu_build"]
    assert states == ["building", "built"]


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
    assert b.fn is not None  # loaded by the reader thread before the build says it is ready
    torch.testing.assert_close(b.fn(x)[0], torch.tanh(x * 2))


def test_a_build_whose_code_does_not_load_is_an_error(monkeypatch):
    def broken(b):
        raise OSError("cannot open shared object")
    monkeypatch.setattr(cpu_builds, "load", broken)
    b = _FakeBuild()
    b._answer({"path": "/nowhere", "seconds": 1.0})
    assert b.ready() and b.fn is None
    assert b.error == "loading the built code failed: OSError: cannot open shared object"
