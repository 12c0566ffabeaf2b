"""The opt-in ``inductor`` executor: regions compiled by torch.compile match eager."""
from __future__ import annotations

import pytest
import torch
import torch._inductor.config
import torch.nn.functional as F

from thundervis.compiler.backend import ThundervisCompiler
from thundervis.compiler.executors import inductor_executor
from thundervis.compiler.executors.base import get_executor
from thundervis.compiler.executors.inductor_executor import InductorExecutor, InductorKernel, region_function
from thundervis.compiler.interpreter import run_symbol
from thundervis.compiler.ir import BoundSymbol, TensorProxy
from thundervis.compiler.observer import CompileObserver


def _p(name, shape, dtype="float32"):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.insert(0, acc)
        acc *= s
    return TensorProxy(name, tuple(shape), dtype, "cpu", tuple(strides))


def _region(name="fw_fusion_0") -> BoundSymbol:
    """x[4, 8] -> softmax(tanh(x * 2 + b)) and its row sums, by hand."""
    x, b = _p("x", [4, 8]), _p("b", [8])
    t0, t1, t2, t3 = _p("t0", [4, 8]), _p("t1", [4, 8]), _p("t2", [4, 8]), _p("t3", [4, 1])
    t4, t5, t6, t7 = _p("t4", [4, 8]), _p("t5", [4, 8]), _p("t6", [4, 1]), _p("t7", [4, 8])
    s8 = _p("t8", [4])
    prims = [
        ("prims.mul", (x, 2.0), t0, "aten.mul.Tensor"), ("prims.add", (t0, b), t1, "aten.add.Tensor"),
        ("prims.tanh", (t1,), t2, "aten.tanh.default"), ("prims.amax", (t2, [-1], True), t3, "aten.amax.default"),
        ("prims.sub", (t2, t3), t4, "aten.sub.Tensor"), ("prims.exp", (t4,), t5, "aten.exp.default"),
        ("prims.sum", (t5, [-1], True), t6, "aten.sum.dim_IntList"), ("prims.div", (t5, t6), t7, "aten.div.Tensor"),
        ("prims.sum", (t7, [1]), s8, "aten.sum.dim_IntList"),
    ]
    subs = tuple(BoundSymbol(sym=s, args=a, kwargs={}, outputs=o, uid=f"f{i}", aten=at)
                 for i, (s, a, o, at) in enumerate(prims))
    return BoundSymbol(sym=name, args=(x, b), kwargs={}, outputs=(t7, s8), uid="f20",
                       origin=tuple(s.uid for s in subs), subsymbols=subs, executor="inductor", fusion=True)


def _eager(fusion, *args):
    env = {p.name: a for p, a in zip(fusion.args, args)}
    for s in fusion.subsymbols:
        run_symbol(s, env, expand=True)
    return tuple(env[p.name] for p in fusion.outputs)


def test_region_function_is_the_reference_semantics():
    fusion = _region()
    x, b = torch.randn(4, 8), torch.randn(8)
    got = region_function(fusion)(x, b)
    for g, w in zip(got, _eager(fusion, x, b)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_claims_and_refusals():
    ex = InductorExecutor()
    fusion = _region()
    assert all(ex.lowering_problem(s) is None for s in fusion.subsymbols)
    a, w = _p("a", [4, 8]), _p("w", [8, 8])
    mm = BoundSymbol(sym="prims.mm", args=(a, w), kwargs={}, outputs=_p("o", [4, 8]), uid="f1", aten="aten.mm.default")
    rnd = BoundSymbol(sym="prims.rand_like", args=(a,), kwargs={}, outputs=_p("r", [4, 8]), uid="f2",
                      aten="aten.rand_like.default")
    assert "matmuls stay with torch" in ex.why_not(mm) and not ex.can_run(mm)
    assert "random numbers" in ex.why_not(rnd)
    record = ex.build_kernel(fusion)
    assert record.language == "python" and "prims.amax(t2, [-1], True)" in record.code
    assert get_executor("inductor").name == "inductor"


def test_unavailable_without_cxx_compiler(monkeypatch):
    monkeypatch.setattr(inductor_executor, "_cxx_compiler", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    reason = InductorExecutor().available()
    assert reason and "C++ compiler" in reason and reason.endswith(".")


def test_compile_failure_falls_back_to_eager_with_warning(monkeypatch):
    fusion = _region()
    kernel = InductorKernel(fusion)

    def broken():
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(kernel, "_compile", broken)
    x, b = torch.randn(4, 8), torch.randn(8)
    with pytest.warns(RuntimeWarning, match="running its prims eagerly"):
        got = kernel(x, b)
    assert "no C++ compiler" in kernel.error
    for g, w in zip(got, _eager(fusion, x, b)):
        torch.testing.assert_close(g, w)


class _Kernels(CompileObserver):
    def __init__(self):
        self.fused, self.failures = [], []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        if name == "fuse":
            self.fused.extend((chain, b.sym, len(b.subsymbols)) for b in trace.symbols
                              if b.fusion and b.executor == "inductor")

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append(error)


@pytest.mark.slow
def test_regions_compiled_by_inductor_match_eager_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(6, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)
    g = torch.randn(16, requires_grad=True)

    def f(x, w, g):
        h = F.layer_norm(x, (16,), g) @ w
        return (torch.softmax(F.gelu(h) * 0.5, -1) * h).sum()

    expected = f(x, w, g)
    expected_grads = torch.autograd.grad(expected, (x, w, g))
    obs = _Kernels()
    compiled = torch.compile(f, backend=ThundervisCompiler(executors=["inductor", "torch"], observer=obs))
    for _ in range(2):  # the second call runs the already compiled regions
        with torch._inductor.config.patch(compile_threads=1):  # no worker pool on 2 cores
            got = compiled(x, w, g)
        with torch._inductor.config.patch(compile_threads=1):
            grads = torch.autograd.grad(got, (x, w, g))
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        for a, b in zip(grads, expected_grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert not obs.failures, obs.failures
    chains = {c for c, _, _ in obs.fused}
    assert chains == {"forward", "backward"}, obs.fused
    assert any(n > 3 for _, _, n in obs.fused), obs.fused  # real multi-op regions, not single prims
