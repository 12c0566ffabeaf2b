"""The fast CPU path: without CUDA the default executors still generate every Triton kernel, but
each fusion runs through torch (its ATen ops, whole decomposed ops folded back) or Inductor,
whichever its first calls measure faster; a named ``triton`` executor runs Triton's interpreter.
Each kernel reports what ran it (``kernel_path`` events)."""
from __future__ import annotations

import os

import pytest
import torch

import thundervis.compiler.executors.triton_executor as triton_executor
from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.executors import cpu_path
from thundervis.compiler.passes.claim import DECOMPOSED

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the fast CPU path is for machines without CUDA")


class Events(CompileObserver):
    """Keeps the runtime events and the traces of the fuse and codegen passes."""

    def __init__(self):
        self.events, self.traces, self.failures = [], {}, []

    def runtime(self, graph, chain, event, data):
        self.events.append((graph, chain, event, data))

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.traces[(chain, name)] = trace

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append(error)

    def paths(self) -> dict:
        """{kernel: the last kernel_path event's data}."""
        return {d["kernel"]: d for _, _, e, d in self.events if e == "kernel_path"}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4))


def _train(executors, calls: int = 3, tmp_path=None):
    """Compile the model, run ``calls`` forward+backward; return (observer, outputs, grads, eager)."""
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Events()
    model = _model()
    ref = _model()
    x = torch.randn(8, 16)
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=executors, observer=obs))
    for _ in range(calls):
        model.zero_grad()
        out = compiled(x)
        out.square().sum().backward()
    ref_out = ref(x)
    ref_out.square().sum().backward()
    torch._dynamo.reset()
    assert not obs.failures, obs.failures
    return obs, out, [p.grad for p in model.parameters()], (ref_out, [p.grad for p in ref.parameters()])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_default_executors_run_fusions_through_torch_not_the_interpreter(cache, monkeypatch):
    def no_launch(*a, **k):
        raise AssertionError("the default CPU path imported a Triton kernel to launch it")
    monkeypatch.setattr(triton_executor, "_import_kernel", no_launch)
    obs, out, grads, (ref_out, ref_grads) = _train(None)
    torch.testing.assert_close(out, ref_out)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    fused = [b for b in obs.traces[("forward", "codegen")].symbols if b.fusion]
    assert fused and all(b.executor == "triton" for b in fused)
    paths = obs.paths()
    assert set(paths) >= {b.sym for b in fused}
    for d in paths.values():
        assert (d["device"], d["via"], d["planned"]) == ("cpu", "torch", False), d
        assert d["torch_us"] > 0 and d["inductor_us"] is None and "inductor not tried" in d["why"]
    # the Triton kernels were still generated and written (what --target compiles, what rerun runs)
    assert any(name.endswith(".py") for name in os.listdir(cache / "triton"))


def test_named_triton_executor_runs_the_interpreter(cache):
    launched = []
    real = triton_executor._import_kernel

    def spy(key, path, source):
        launched.append(path)
        return real(key, path, source)
    triton_executor._import_kernel = spy
    try:
        obs, out, grads, (ref_out, ref_grads) = _train(["triton", "torch"], calls=1)
    finally:
        triton_executor._import_kernel = real
    torch.testing.assert_close(out, ref_out)
    assert launched
    paths = obs.paths()
    assert paths and all((d["device"], d["via"], d["planned"]) == ("cpu", "triton-interpreter", True)
                         for d in paths.values())


def test_a_region_holding_a_whole_decomposed_op_calls_that_op(cache):
    obs, *_ = _train(None, calls=1)
    fuse = obs.traces[("forward", "fuse")]
    parents = fuse.meta.get(DECOMPOSED)
    assert parents, "claim keeps the decomposed symbols it flattened"
    norm = next(b for b in fuse.symbols if b.fusion and any(s.aten == "aten.var.correction" or "layer_norm" in str(s.aten)
                                                            or s.sym == "prims.rsqrt" for s in b.subsymbols))
    steps = cpu_path.region_steps(norm, parents)
    assert "aten.native_layer_norm.default" in [s.sym for s in steps]
    assert len(steps) < len(norm.subsymbols)
    # the folded program computes what the members compute
    args = [torch.randn(p.shape, dtype=getattr(torch, p.dtype)) for p in norm.args]
    folded = cpu_path.torch_region(norm, parents)(*args)
    members = cpu_path.torch_region(norm)(*args)
    for a, b in zip(folded, members):
        torch.testing.assert_close(a, b)


def test_region_steps_keep_members_when_a_decomposed_op_is_split():
    fuse_obs, *_ = _train(None, calls=1)
    fuse = fuse_obs.traces[("forward", "fuse")]
    parents = fuse.meta.get(DECOMPOSED) or {}
    region = next(b for b in fuse.symbols if b.fusion)
    # drop one member: no decomposed op is whole any more, and nothing is folded
    part = region.replace(subsymbols=region.subsymbols[1:])
    folded_syms = {s.sym for s in cpu_path.region_steps(part, parents)}
    whole = {p.sym for p in parents.values() if all(s.uid in {m.uid for m in part.subsymbols} for s in p.subsymbols)}
    assert not (folded_syms - {s.sym for s in part.subsymbols}) - whole


def test_a_decomposed_op_that_cannot_be_called_whole_leaves_the_others_folded(cache):
    """The backward region holds layer norm's, GELU's and t's decompositions whole, but layer norm
    backward's call reads the bias, which its prims never read and the region does not have: it
    keeps its members, while GELU's backward and t are still called as one ATen op each (before,
    one such op kept every member of the region), and the program computes what the members do."""
    obs, *_ = _train(None, calls=1)
    fuse = obs.traces[("backward", "fuse")]
    parents = fuse.meta.get(DECOMPOSED) or {}
    region = next(b for b in fuse.symbols if b.fusion and any(
        parents.get(s.origin[0]) is not None and parents[s.origin[0]].sym == "aten.native_layer_norm_backward.default"
        for s in b.subsymbols if len(s.origin) == 1))
    steps = [s.sym for s in cpu_path.region_steps(region, parents)]
    assert "aten.gelu_backward.default" in steps and "aten.native_layer_norm_backward.default" not in steps
    assert len(steps) < len(region.subsymbols)
    args = [torch.randn(p.shape, dtype=getattr(torch, p.dtype)) for p in region.args]
    for a, b in zip(cpu_path.torch_region(region, parents)(*args), cpu_path.torch_region(region)(*args)):
        torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_hot_regions_try_inductor_and_keep_the_faster(cache, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "0")
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "2")
    from thundervis.compiler.executors import cpu_builds
    real_submit = cpu_builds.submit

    def submit_and_wait(request):  # the worker's compile, waited for: the calls below decide
        build = real_submit(request)
        build.wait(600)
        return build
    monkeypatch.setattr(cpu_builds, "submit", submit_and_wait)
    calls = 2 + 2 + 2 * cpu_path._MEASURED_CALLS + 1  # first, hot, sent, loaded, then alternated
    obs, out, grads, (ref_out, ref_grads) = _train(None, calls=calls)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
    decided = [d for d in obs.paths().values()]
    assert decided
    for d in decided:
        assert d["planned"] is False and d["torch_us"] is not None
        if d["why"].startswith("inductor failed"):
            assert d["via"] == "torch"
            continue
        assert d["inductor_us"] is not None, d
        assert len(d["samples_us"]["torch"]) == len(d["samples_us"]["inductor"]) == cpu_path._MEASURED_CALLS
        faster = "inductor" if d["inductor_us"] < d["torch_us"] else "torch"
        assert d["via"] == faster, d


def test_thresholds_read_the_environment(monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "off")
    assert cpu_path.inductor_threshold_us() is None
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "250")
    assert cpu_path.inductor_threshold_us() == 250.0
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "nonsense")
    assert cpu_path.inductor_threshold_us() == 100.0
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "0")
    assert cpu_path.inductor_after_calls() == 1


def test_a_compile_waits_for_one_an_interrupt_left_running_and_gives_up_within_bounds(monkeypatch):
    """Region compiles run one at a time, also after an interrupt ended the wait for one (it keeps
    compiling): the next waits for it, and past the bound returns an error (the region keeps
    torch) instead of compiling beside it; :func:`wait_for_compiles` says whether any is left."""
    import threading

    import torch

    from thundervis.compiler.executors import cpu_compile_thread as cpu_path
    monkeypatch.setattr(cpu_path, "_EARLIER_COMPILE_WAIT_S", 0.05)
    running = threading.Event()  # an unfinished compile, as an interrupted one looks
    with cpu_path._compiling_lock:
        cpu_path._compiling.add(running)
    try:
        assert cpu_path.unfinished_compiles() == 1 and not cpu_path.wait_for_compiles(0.01)
        job = cpu_path.compile_in_fresh_thread(lambda x: x * 2, (torch.ones(3),))
        assert set(job) == {"error"} and "has not ended after 0.05 s" in str(job["error"])
    finally:
        with cpu_path._compiling_lock:
            cpu_path._compiling.discard(running)
    assert cpu_path.wait_for_compiles(0.01)
    job = cpu_path.compile_in_fresh_thread(lambda x: x * 2, (torch.ones(3),))
    out = job["fn"](torch.ones(3))  # none left: it compiles
    assert torch.equal(out[0] if isinstance(out, (tuple, list)) else out, torch.full((3,), 2.0))
    assert cpu_path.unfinished_compiles() == 0


def _doubling_region():
    """A one-op fusion (``t0 = a * 2``) built by hand: no compile needed."""
    from thundervis.compiler.ir import BoundSymbol, TensorProxy
    a = TensorProxy("a", (4,), "float32", "cpu", (1,))
    t0 = TensorProxy("t0", (4,), "float32", "cpu", (1,))
    mul = BoundSymbol("prims.mul", (a, 2.0), {}, t0, "m0", aten="aten.mul.Tensor")
    return BoundSymbol("triton_fusion_0", (a,), {}, (t0,), "f0", subsymbols=(mul,), executor="triton")


def test_a_witnessed_call_names_the_torch_function_only_for_what_that_function_returned(monkeypatch):
    """``run_witnessed`` names the launcher's torch-path function only when the outputs handed
    back are the very object that function returned, in this call, for these very arguments: on
    the first call (the timed one) and on later ones; not when another function ran the region
    (Inductor's), and not when something between the function and the caller hands back other
    tensors (the numerics check then runs eager apart and flags them). Plain calls are not watched."""
    monkeypatch.setenv("THUNDERVIS_CPU_INDUCTOR_MIN_US", "off")
    x = torch.randn(4)
    region = cpu_path.CpuRegion(_doubling_region(), inductor=False)
    for _ in range(2):  # the first call, then a plain later one
        out, made_by = region.run_witnessed(x)
        assert made_by is region.torch_fn and torch.equal(out[0], x * 2)
    assert region._witness is None and torch.equal(region(x)[0], x * 2)
    out, made_by = region.run_witnessed(x.clone())  # other argument objects: witnessed for those
    assert made_by is region.torch_fn
    region.fn, region.via = (lambda a: (a + a,)), cpu_path.VIA_INDUCTOR  # as when Inductor won
    out, made_by = region.run_witnessed(x)
    assert made_by is None and torch.equal(out[0], x * 2)
    copying = cpu_path.CpuRegion(_doubling_region(), inductor=False)
    real = cpu_path.CpuRegion.__call__
    monkeypatch.setattr(cpu_path.CpuRegion, "__call__", lambda self, *a: tuple(t.clone() for t in real(self, *a)))
    assert copying.run_witnessed(x)[1] is None
    assert copying.run_witnessed(x)[1] is None
