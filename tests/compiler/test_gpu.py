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
