"""Fused outputs recorded as strided views keep their layout's memory order (GPT-2's split qkv)."""
from __future__ import annotations

import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.executors.triton_index import dense_strides_like, out_strides
from thundervis.compiler.ir import TensorProxy


def test_dense_strides_keep_the_recorded_order():
    # A transposed slice of a [2, 8, 96] qkv tensor viewed as [2, 8, 4, 8]: physical order (B, T, H, D).
    assert dense_strides_like((2, 4, 8, 8), (768, 8, 96, 1)) == (256, 8, 32, 1)
    assert dense_strides_like((3, 4), (0, 1)) == (4, 1)  # broadcast dims outermost: row-major
    assert dense_strides_like((3, 4), (1, 3)) == (1, 3)
    dense = TensorProxy("t", (2, 3), "float32", "cpu", (1, 2))
    assert out_strides(dense) == (1, 2)
    sliced = TensorProxy("t", (2, 4, 8, 8), "float32", "cpu", (768, 8, 96, 1))
    assert out_strides(sliced) == (256, 8, 32, 1)


def _attention(x, w, b):
    B, T, C, H = x.shape[0], x.shape[1], 32, 4
    q, k, v = (x @ w + b).split(C, dim=2)
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).view(B, T, C)  # a view: needs SDPA's output in eager's layout


def test_split_qkv_attention_compiles_with_the_default_executors(recorder_cls):
    reset_graph_ids()
    rec = recorder_cls()
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 8, 32), torch.randn(32, 96) * 0.2, torch.randn(96) * 0.1
    args = [t.clone().requires_grad_() for t in (x, w, b)]
    eager = _attention(*args)
    eager.square().sum().backward()
    cargs = [t.clone().requires_grad_() for t in (x, w, b)]
    got = torch.compile(_attention, backend=ThundervisCompiler(observer=rec))(*cargs)
    got.square().sum().backward()
    assert rec.failures == []
    torch.testing.assert_close(got, eager)
    for a, c in zip(args, cargs):
        torch.testing.assert_close(c.grad, a.grad, rtol=1e-4, atol=1e-4)  # float32 sums in another order
