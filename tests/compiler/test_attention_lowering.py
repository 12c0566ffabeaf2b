"""CPU flash attention (what ``F.scaled_dot_product_attention`` calls on the CPU) lowers to prims,
forward and backward, grouped-query attention included: the lowerings compute the ATen ops' own
results, and a compiled attention trains like eager with no flash attention op left whole."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.nn_lowerings import _flash_attention_cpu, _flash_attention_cpu_backward

aten = torch.ops.aten
# (query heads, key/value heads, causal, float mask)
CASES = [(4, 4, True, False), (4, 4, False, True), (4, 2, True, False), (6, 2, False, True), (4, 1, True, False)]


def _inputs(hq, hk, seed=0):
    """Query, key and value as attention layers make them: [B, H, T, E] views of [B, T, H, E]."""
    g = torch.Generator().manual_seed(seed)
    B, T, E = 2, 8, 16
    q = torch.randn(B, T, hq, E, generator=g).transpose(1, 2)
    k = torch.randn(B, T, hk, E, generator=g).transpose(1, 2)
    v = torch.randn(B, T, hk, E, generator=g).transpose(1, 2)
    return q, k, v, torch.randn(T, T, generator=g)


@pytest.mark.parametrize("hq,hk,causal,masked", CASES)
def test_the_lowerings_compute_what_the_aten_ops_compute(hq, hk, causal, masked):
    q, k, v, mask = _inputs(hq, hk)
    mask = mask if masked else None
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=mask)
    mine = _flash_attention_cpu(q, k, v, 0.0, causal, attn_mask=mask)
    torch.testing.assert_close(mine[0], out)
    torch.testing.assert_close(mine[1], lse)
    grad = torch.randn_like(out)
    want = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, causal,
                                                                       attn_mask=mask)
    got = _flash_attention_cpu_backward(grad, q, k, v, out, lse, 0.0, causal, attn_mask=mask)
    for name, a, b in zip(("query", "key", "value"), got, want):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"grad {name}: {m}")


def test_cases_the_lowerings_leave_to_torch():
    q, k, v, _ = _inputs(4, 4)
    assert _flash_attention_cpu(q, k, v, 0.1) is NotImplemented                   # random dropout
    assert _flash_attention_cpu(q.half(), k.half(), v.half()) is NotImplemented   # low precision
    q3, k3, v3, _ = _inputs(3, 2)
    assert _flash_attention_cpu(q3, k3, v3) is NotImplemented                     # heads that do not group
    grad = torch.zeros_like(q)
    lse = torch.zeros(q.shape[:3])
    bool_mask = torch.ones(8, 8, dtype=torch.bool)
    assert _flash_attention_cpu_backward(grad, q, k, v, q, lse, 0.0, False, attn_mask=bool_mask) is NotImplemented
    assert _flash_attention_cpu(q, k, v, attn_mask=bool_mask) is NotImplemented   # a row masked entirely
    assert _flash_attention_cpu(q, k[:, :, :4], v[:, :, :4], 0.0, True) is NotImplemented  # rows with no key


class Traces(CompileObserver):
    """Keeps the claim pass's trace of each chain."""

    def __init__(self):
        self.claimed = {}

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        if name == "claim":
            self.claimed[chain] = trace


@pytest.mark.parametrize("hq,hk,causal,masked", CASES)
def test_compiled_attention_trains_like_eager_with_no_flash_attention_op_left(hq, hk, causal, masked):
    q, k, v, mask = _inputs(hq, hk, seed=1)
    mask = mask if masked else None
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def f(q, k, v):
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=hq != hk)
        return y.square().sum()

    torch._dynamo.reset()
    obs = Traces()
    compiled = torch.compile(f, backend=ThundervisCompiler(observer=obs), dynamic=False)
    got = compiled(*leaves)
    got_grads = torch.autograd.grad(got, leaves)
    want = f(*leaves)
    want_grads = torch.autograd.grad(want, leaves)
    torch._dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert set(obs.claimed) == {"forward", "backward"}
    for chain, trace in obs.claimed.items():
        left = [b.sym for b in trace.symbols if "flash_attention" in b.sym]
        assert not left, f"{chain}: {left} left whole"


def test_an_attention_too_large_to_hold_its_scores_stays_with_torch_and_says_why(monkeypatch):
    """Past :data:`ATTENTION_SCORES_LIMIT` scores the op stays whole (torch's flash kernel never
    holds them whole), forward and backward, with the reason as its fallback note; training is
    still eager's."""
    import thundervis.compiler.decompositions as decompositions
    import thundervis.compiler.nn_lowerings as lowerings
    monkeypatch.setattr(lowerings, "ATTENTION_SCORES_LIMIT", 2 * 4 * 8 * 8 - 1)  # the cases' 512, less one
    monkeypatch.setattr(decompositions, "_TEMPLATES", {})  # lowered before in this process: trace again
    q, k, v, _ = _inputs(4, 4, seed=2)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).square().sum()

    torch._dynamo.reset()
    obs = Traces()
    compiled = torch.compile(f, backend=ThundervisCompiler(observer=obs), dynamic=False)
    got = compiled(*leaves)
    got_grads = torch.autograd.grad(got, leaves)
    want_grads = torch.autograd.grad(f(*leaves), leaves)
    torch._dynamo.reset()
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for chain, trace in obs.claimed.items():
        whole = [b for b in trace.symbols if "flash_attention" in b.sym]
        assert len(whole) == 1, chain
        assert "512 scores" in (whole[0].note or "") and "flash kernel" in whole[0].note, whole[0].note
