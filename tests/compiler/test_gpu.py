"""CUDA end-to-end checks (``pytest -m cuda``; skipped without a CUDA device): the default executors
and the inductor executor on a GPU match eager, in fp32 and bf16."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from thundervis.compiler.backend import ThundervisCompiler
from thundervis.compiler.observer import CompileObserver

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


class _Record(CompileObserver):
    def __init__(self):
        self.kernels, self.failures = [], []

    def kernels_built(self, graph, chain, kernels):
        self.kernels.extend(kernels)

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append(error)


def test_train_gpt_on_cuda_matches_eager(example):
    gpt = example("train_gpt")
    model, batches = gpt.build(batches=3)
    eager = gpt.train(model.cuda(), [(x.cuda(), y.cuda()) for x, y in batches], 3)
    obs = _Record()
    model, batches = gpt.build(batches=3)
    compiled = gpt.train(model.cuda(), [(x.cuda(), y.cuda()) for x, y in batches], 3,
                         compile_fn=lambda m: torch.compile(m, backend=ThundervisCompiler(observer=obs)))
    assert not obs.failures, obs.failures
    assert obs.kernels, "no fusion kernels were built on CUDA"
    for a, b in zip(compiled, eager):
        assert abs(a - b) <= 1e-4 * abs(b), (compiled, eager)


def _block(x, w, g):
    h = F.layer_norm(x, (x.shape[-1],), g) @ w
    return (torch.softmax(F.gelu(h) * 0.5, -1) * h).sum()


@pytest.mark.parametrize("executors", [None, ["inductor", "torch"]], ids=["default", "inductor"])
def test_block_fwd_bwd_bf16_on_cuda(executors):
    torch.manual_seed(0)
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True) / 16
    g = torch.randn(256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    expected = _block(x, w, g)
    expected_grads = torch.autograd.grad(expected, (x, w, g))
    obs = _Record()
    fn = torch.compile(_block, backend=ThundervisCompiler(executors=executors, observer=obs))
    got = fn(x, w, g)
    grads = torch.autograd.grad(got, (x, w, g))
    assert not obs.failures, obs.failures
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-1)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a.float(), b.float(), rtol=5e-2, atol=5e-2)


def _compiled_on_cuda(fn, *args):
    """Return (compiled outputs, eager outputs, kernels built) of ``fn`` on CUDA with the triton executor."""
    torch._dynamo.reset()
    obs = _Record()
    got = torch.compile(fn, backend=ThundervisCompiler(executors=["triton", "torch"], observer=obs))(*args)
    assert not obs.failures, obs.failures
    return got, fn(*args), obs.kernels


def _kernel_ops(kernels) -> set:
    return {s.sym.removeprefix("prims.") for k in kernels for s in k.region.symbols}


def test_exact_division_remainder_and_index_reductions_on_cuda():
    """Eager's numbers bit for bit on the GPU: Triton's `/` is div.full.f32 there (2 ulp) and its
    `//` and `%` truncate, so these ops are written from exact ones (triton_arith)."""
    gen = torch.Generator().manual_seed(0)
    n = 20000
    a = (torch.randn(n, generator=gen) * 10 ** torch.randint(-20, 38, (n,), generator=gen).float()).cuda()
    b = (torch.randn(n, generator=gen) * 10 ** torch.randint(-45, 38, (n,), generator=gen).float()).cuda()
    a[:4], b[:4] = torch.tensor([1.0, -7.5, 6.0, 0.3]), torch.tensor([0.1, 2.0, 3.0, 0.1])
    i = torch.randint(-50, 50, (n,), generator=gen).cuda()
    j = torch.randint(1, 9, (n,), generator=gen).cuda() * torch.where(torch.rand(n, generator=gen) < 0.5, -1, 1).cuda()

    def f(a, b, i, j):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b),
                torch.remainder(a, b), torch.div(i, j, rounding_mode="floor"), torch.remainder(i, j), torch.fmod(i, j),
                a.view(100, 200).argmax(-1), a.view(100, 200).argmin(0))
    got, want, kernels = _compiled_on_cuda(f, a, b, i, j)
    for g, w in zip(got, want):
        same = (g == w) | (g.isnan() & w.isnan()) if g.is_floating_point() else g == w
        assert same.all(), (g[~same][:5], w[~same][:5])
    assert {"div", "fmod", "remainder", "argmax", "argmin"} <= _kernel_ops(kernels)


def test_scatter_puts_frame_and_out_of_range_indices_on_cuda():
    """scatter_add and multi-index index_put (atomics), BatchNorm's training forward and backward in
    the permuted frame, and an index out of range (masked: no memory outside the tensor is touched)."""
    torch.manual_seed(0)
    x = torch.randn(8, 16, 40, 40, device="cuda", requires_grad=True)
    w = torch.randn(16, device="cuda", requires_grad=True)
    bias = torch.randn(16, device="cuda", requires_grad=True)

    def bn(x, w, bias):
        return (torch.relu(F.batch_norm(x, None, None, w, bias, training=True)) * torch.linspace(0, 1, 40, device="cuda")).sum()
    got, want, kernels = _compiled_on_cuda(bn, x, w, bias)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    ga, gw = torch.autograd.grad(got, (x, w, bias)), torch.autograd.grad(want, (x, w, bias))
    for a, b in zip(ga, gw):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)
    idx = torch.randint(0, 40, (300, 7), device="cuda")
    src = torch.randn(300, 7, device="cuda")
    ih, iw = torch.randint(-8, 8, (5, 1), device="cuda"), torch.randint(0, 8, (6,), device="cuda")
    vals = torch.randn(2, 3, 5, 6, device="cuda")

    def puts(src, idx, vals, ih, iw):
        return (torch.zeros(40, 7, device="cuda").scatter_add(0, idx, src * 2),
                torch.ops.aten.index_put(torch.zeros(2, 3, 8, 8, device="cuda"), [None, None, ih, iw], vals * 1, True))
    got, want, kernels = _compiled_on_cuda(puts, src, idx, vals, ih, iw)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert {"scatter_add", "index_put"} <= _kernel_ops(kernels)
    table = torch.randn(10, 4, device="cuda")
    bad = torch.tensor([[0, 3, 12], [9, -20, 1]], device="cuda")
    got, _, _ = _compiled_on_cuda(lambda t, i: F.embedding(i, t * 2), table, torch.tensor([[0, 3, 1]], device="cuda"))
    torch._dynamo.reset()
    emb = torch.compile(lambda t, i: F.embedding(i, t * 2), backend=ThundervisCompiler(executors=["triton", "torch"]))(table, bad)
    torch.cuda.synchronize()  # a write or read outside the tensor would fault here
    assert emb[0, 2].eq(0).all() and emb[1, 1].eq(0).all()
    torch.testing.assert_close(emb[0, :2], table[[0, 3]] * 2)
