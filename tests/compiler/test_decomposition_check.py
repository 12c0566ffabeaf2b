"""The always-on decomposition check: a decomposition whose outputs differ from what the ATen op is
recorded with (count, shape, dtype, strides) is refused, the op runs in torch with the reason in
its note, and training stays equal to eager. Regression: attention through
``aten._scaled_dot_product_flash_attention_for_cpu`` whose PyTorch decomposition returns the
attention weights where the op returns its logsumexp."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thundervis.compiler.decompositions as dec
from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.decomposition_check import STATS, is_dense, layout_differs, output_mismatch
from thundervis.compiler.ir import BoundSymbol, Minter, Trace, TensorProxy
from thundervis.compiler.passes.decompose import decompose

aten = torch.ops.aten


def _p(name, shape, dtype="float32", strides=None):
    return TensorProxy(name, tuple(shape), dtype, "cpu", strides)


# -- the check itself ------------------------------------------------------------------------------

def test_matching_outputs_pass():
    out = _p("t0", (4, 2, 8), strides=(16, 8, 1))
    assert output_mismatch([out], [((4, 2, 8), "float32", "cpu", (16, 8, 1))]) is None
    # unknown recorded strides are not compared; size-1 dims' strides mean nothing
    assert output_mismatch([_p("t1", (4, 1))], [((4, 1), "float32", "cpu", (1, 1))]) is None
    assert not layout_differs((4, 1), (1, 4), (1, 1))
    assert output_mismatch([None], [None]) is None  # a non-tensor output


def test_view_strides_are_not_compared():
    """A diagonal (stride n + 1) or unfold (overlapping windows) is a view into another tensor; a
    functional decomposition computes the same values into a fresh, dense tensor."""
    assert is_dense((3, 4), (4, 1)) and is_dense((3, 4), (1, 3)) and is_dense((1, 4), (99, 1))
    assert not is_dense((5,), (6,)) and not is_dense((3, 3, 2), (2, 1, 6))
    assert output_mismatch([_p("d", (5,), strides=(6,))], [((5,), "float32", "cpu", (1,))]) is None
    assert output_mismatch([_p("t", (2, 2), strides=(1, 2))], [((2, 2), "float32", "cpu", (2, 1))]) is not None


@pytest.mark.parametrize("computed, words", [
    (((4, 2, 8, 8), "float32", "cpu", None), "cpu f32[4, 2, 8, 8] where the op is recorded with cpu f32[4, 2, 8]"),
    (((4, 2, 8), "int64", "cpu", None), "i64[4, 2, 8]"),
    (((4, 2, 8), "float32", "cpu", (1, 4, 8)), "strides (1, 4, 8) where the op is recorded with (16, 8, 1)"),
    (None, "non-tensor"),
])
def test_mismatching_output_is_named(computed, words):
    out = _p("t0", (4, 2, 8), strides=(16, 8, 1))
    reason = output_mismatch([out], [computed])
    assert reason is not None and words in reason and "t0" in reason


def test_output_count_mismatch():
    reason = output_mismatch([_p("a", (2,)), _p("b", (2,))], [((2,), "float32", "cpu", (1,))])
    assert reason == "its decomposition returns 1 outputs where the op is recorded with 2"


def _decompose_one(sym: str, args, outputs) -> BoundSymbol:
    ins = tuple(p for p in args if isinstance(p, TensorProxy))
    b = BoundSymbol(sym, tuple(args), {}, outputs, uid="f0")
    trace = Trace("t", ins, (b,), outputs if isinstance(outputs, tuple) else (outputs,), next_uid=1, next_name=100)
    (out,) = decompose(trace).symbols
    return out


def test_wrong_decomposition_is_refused_with_reason(monkeypatch):
    """A decomposition of ``max.dim`` returning (indices, values) instead of (values, indices)
    must not be bound to the recorded outputs: the op stays whole with the reason."""
    table = dict(dec.decomposition_table())
    table[aten.max.dim] = lambda x, dim, keepdim=False: (aten.argmax.default(x, dim, keepdim),
                                                         aten.amax.default(x, [dim], keepdim))
    monkeypatch.setattr(dec, "decomposition_table", lambda: table)
    monkeypatch.setattr(dec, "_TEMPLATES", {})
    x = _p("x", (3, 5), strides=(5, 1))
    outs = (_p("v", (3,), strides=(1,)), _p("i", (3,), "int64", strides=(1,)))
    before = STATS.refused
    b = _decompose_one("aten.max.dim", (x, 1), outs)
    assert not b.subsymbols, "a wrong decomposition must not be used"
    assert b.note.startswith("not lowered: its decomposition computes output 0 (v) as cpu i64[3]")
    assert STATS.refused == before + 1


def test_right_decomposition_is_kept():
    x = _p("x", (3, 5), strides=(5, 1))
    outs = (_p("v", (3,), strides=(1,)), _p("i", (3,), "int64", strides=(1,)))
    b = _decompose_one("aten.max.dim", (x, 1), outs)
    assert b.subsymbols and b.note is None
    produced = {p.name: p for s in b.subsymbols for p in s.flat_outputs()}
    assert produced["v"].dtype == "float32" and produced["i"].dtype == "int64"


def test_flash_attention_decomposition_is_refused():
    """PyTorch decomposes the CPU flash attention into ops whose 2nd result is [B, H, T, T]."""
    q = _p("q", (2, 2, 8, 4), strides=(64, 32, 4, 1))
    outs = (_p("o", (2, 2, 8, 4), strides=(8, 4, 16, 1)), _p("lse", (2, 2, 8), strides=(16, 8, 1)))
    b = _decompose_one("aten._scaled_dot_product_flash_attention_for_cpu.default", (q, q, q, 0.0, True), outs)
    if b.subsymbols:  # a lowering of our own must then compute the logsumexp's shape
        produced = {p.name: p for s in b.subsymbols for p in s.flat_outputs()}
        assert produced["lse"].shape == (2, 2, 8)
    else:
        assert "lse" in b.note and "f32[2, 2, 8, 8]" in b.note


# -- a model trained with the default executors ---------------------------------------------------

class Attention(nn.Module):
    """A causal self-attention block through F.scaled_dot_product_attention."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C)).pow(2).mean()


def _train(compiled: bool, steps=3):
    torch.manual_seed(0)
    model = Attention()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    run = torch.compile(model, backend=ThundervisCompiler(), dynamic=False) if compiled else model
    x = torch.randn(4, 32, 16, generator=torch.Generator().manual_seed(1))
    losses, grads = [], []
    for _ in range(steps):
        loss = run(x)
        opt.zero_grad()
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        opt.step()
        losses.append(loss.item())
    return losses, grads


def test_attention_trains_like_eager_with_default_executors():
    torch._dynamo.reset()
    want_losses, want_grads = _train(False)
    got_losses, got_grads = _train(True)
    torch._dynamo.reset()
    assert got_losses == pytest.approx(want_losses, rel=1e-5)
    for step, (g, w) in enumerate(zip(got_grads, want_grads)):
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda m: f"step {step}: {m}")


def test_other_dense_layout_is_restrided():
    """A decomposition with the right values in another dense layout than recorded ends with a
    copy into the recorded layout (permute, contiguous clone, permute back) instead of being refused."""
    from thundervis.compiler.interpreter import run_trace

    x = _p("x", (2, 3), strides=(3, 1))
    out = _p("o", (3, 2), strides=(1, 3))
    b = _decompose_one("aten.as_strided.default", (x, [3, 2], [1, 3]), out)
    assert b.subsymbols and b.note is None
    last = b.subsymbols[-1]
    assert last.sym == "prims.permute" and last.outputs == out
    assert any(s.sym == "prims.clone" and s.kwargs.get("memory_format") == torch.contiguous_format
               for s in b.subsymbols)
    trace = Trace("t", (x,), tuple(b.subsymbols), (out,), next_uid=99, next_name=999)
    t = torch.arange(6.0).view(2, 3)
    (got,) = run_trace(trace, [t])
    want = torch.as_strided(t, (3, 2), (1, 3))
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
