"""Edge cases of lowering and acquisition that the OpInfo sweep found: cached lowerings of
aliased arguments, tensor constants baked into graphs, custom operators; and lowerings of our own
(weight normalization's backward)."""
from __future__ import annotations

import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.interpreter import run_trace


class _Traces(CompileObserver):
    def __init__(self):
        self.traces, self.failures = {}, []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.traces[(chain, name)] = trace

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((chain, error))


def _compile(fn, *args):
    torch._dynamo.reset()
    obs = _Traces()
    out = torch.compile(fn, backend=ThundervisCompiler(executors=["torch"], debug=True, observer=obs))(*args)
    return out, obs


def test_lowering_cache_tells_aliased_arguments_apart():
    """``xlogy(a, a)`` and ``xlogy(a, b)`` have the same metadata but different lowerings."""
    a, b = torch.rand(3) + 0.5, torch.rand(3) + 0.5
    fn = lambda a, b: torch.xlogy(a, a) + torch.xlogy(a, b)  # noqa: E731
    out, obs = _compile(fn, a, b)
    torch.testing.assert_close(out, fn(a, b))
    decomposed = obs.traces[("inference", "decompose")]
    (lowered,) = run_trace(decomposed, [a, b], expand=True)
    torch.testing.assert_close(lowered, fn(a, b))


def test_uniform_tensor_constant_becomes_a_factory_call():
    """A ``torch.tensor(-1.)`` made inside the function is a constant of the graph: it is rebuilt
    by a factory prim instead of sending the graph back to eager."""
    x = torch.randn(5)
    fn = lambda x: torch.where(x > 0, x, torch.tensor(-1.0))  # noqa: E731
    out, obs = _compile(fn, x)
    assert not obs.failures
    torch.testing.assert_close(out, fn(x))
    acquired = obs.traces[("inference", "acquire")]
    assert any(b.sym == "aten.scalar_tensor.default" and b.args == (-1.0,) for b in acquired.symbols)
    decomposed = obs.traces[("inference", "decompose")]
    assert all(b.sym.startswith("prims.") or b.subsymbols for b in decomposed.symbols), "all lowered to prims"


def test_custom_operator_runs_in_torch_with_a_reason():
    """An operator of another namespace is run by the torch executor, its note says why."""
    lib = torch.library.Library("thundervis_test", "FRAGMENT")  # noqa: TOR901
    lib.define("scale(Tensor x, float s) -> Tensor")
    lib.impl("scale", lambda x, s: x * s, "CPU")
    lib.impl("scale", lambda x, s: torch.empty_like(x), "Meta")
    x = torch.randn(4)
    fn = lambda x: torch.ops.thundervis_test.scale(x, 3.0) + 1  # noqa: E731
    out, obs = _compile(fn, x)
    assert not obs.failures
    torch.testing.assert_close(out, x * 3.0 + 1)
    final = obs.traces[("inference", "codegen")]
    (custom,) = [b for b in final.symbols if b.sym.startswith("thundervis_test.")]
    assert custom.executor == "torch" and "not lowered" in (custom.note or "")


def test_the_lowerings_import_in_a_fresh_process():
    # prims.fma (lowered here) is registered by Inductor's prims, which torch imports only with
    # Dynamo: `import thundervis.compiler.pipeline` first in a process used to fail on it
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", "import thundervis.compiler.pipeline"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_weight_norm_backward_lowers_to_what_aten_computes():
    """``_weight_norm_interface_backward`` (the backward of ``torch.nn.utils.weight_norm``) lowers to
    prims: on its own it computes ATen's gradients (first and last dim, 1-D to 3-D, float32 and
    float64), and a weight-normalized layer trains like eager with no op left whole."""
    from thundervis.compiler.nn_lowerings import _weight_norm_backward
    aten = torch.ops.aten
    g = torch.Generator().manual_seed(0)
    for shape, dim in [((6, 8), 0), ((6, 8), 1), ((4, 3, 5), 0), ((4, 3, 5), 2), ((7,), 0)]:
        for dtype in (torch.float32, torch.float64):
            v = torch.randn(shape, dtype=dtype, generator=g)
            gain = torch.randn([s if i == dim else 1 for i, s in enumerate(shape)], dtype=dtype, generator=g)
            w, norms = aten._weight_norm_interface(v, gain, dim)
            grad = torch.randn(w.shape, dtype=dtype, generator=g)
            want = aten._weight_norm_interface_backward(grad, v, gain, norms, dim)
            got = _weight_norm_backward(grad, v, gain, norms, dim)
            for a, b in zip(got, want):
                assert (a.shape, a.dtype) == (b.shape, b.dtype)
                torch.testing.assert_close(a, b)
    assert _weight_norm_backward(*(t.half() for t in (grad, v, gain, norms)), 0) is NotImplemented

    torch.manual_seed(0)
    layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(8, 6))
    x = torch.randn(4, 8)
    fn = lambda x: layer(x).square().sum()  # noqa: E731
    torch._dynamo.reset()
    obs = _Traces()
    out = torch.compile(fn, backend=ThundervisCompiler(observer=obs))(x)
    out.backward()
    got = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    fn(x).backward()
    torch._dynamo.reset()
    for a, b in zip(got, [p.grad for p in layer.parameters()]):
        torch.testing.assert_close(a, b)
    claimed = obs.traces[("backward", "claim")]
    assert not [b.sym for b in claimed.symbols if "weight_norm" in b.sym]
