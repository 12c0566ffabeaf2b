"""Lowerings of neural-network layers' ATen ops that PyTorch does not decompose into prims: CPU
flash attention (forward and backward, grouped-query heads included, within a size limit), and the
backward of weight normalization, replication padding and adaptive average pooling.

:data:`NN_LOWERINGS` is merged with :data:`.lowerings.ATEN_LOWERINGS` into the table
:mod:`.decompositions` traces with; each lowering follows :mod:`.lowerings`' rules (runs under
``make_fx`` on fake tensors, returns ``NotImplemented`` or raises :class:`~.lowerings.Refused`).
"""
from __future__ import annotations

import torch

from .lowerings import Refused

aten = torch.ops.aten


def _flash_attention_cpu(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """CPU flash attention as the math it computes: ``(softmax(q k^T * scale + mask) v, logsumexp)``.

    PyTorch's own decomposition returns the attention weights ``[B, H, L, S]`` as the second output,
    where the op returns the logsumexp ``[B, H, L]`` its backward reads; this one returns both as
    the op does (the decomposition check then puts the output in the op's memory layout)."""
    groups = _head_groups(q, k, v, dropout_p, is_causal, attn_mask)
    if groups is None:
        return NotImplemented
    k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
    s = _attention_scores(q, k, is_causal, attn_mask, scale)
    lse = aten.logsumexp.default(s, [-1])
    p = aten.exp.default(aten.sub.Tensor(s, aten.unsqueeze.default(lse, -1)))
    return aten.matmul.default(p, v), lse


def _flash_attention_cpu_backward(grad_out, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None, scale=None):
    """The gradients of :func:`_flash_attention_cpu` (``grad_query, grad_key, grad_value``), from
    the probabilities rebuilt with the forward's logsumexp: ``p = exp(s - lse)``, ``dv = p^T g``,
    ``ds = p * (g v^T - rowsum(g * out))``, ``dq = ds k * scale``, ``dk = ds^T q * scale``
    (``rowsum(g * out)`` is ``rowsum(p * g v^T)``, as flash attention's backward computes it).
    The same cases as the forward stay with torch."""
    groups = _head_groups(q, k, v, dropout_p, is_causal, attn_mask)
    if groups is None:
        return NotImplemented
    k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
    factor = _attention_scale(q, scale)
    p = aten.exp.default(aten.sub.Tensor(_attention_scores(q, k, is_causal, attn_mask, scale),
                                         aten.unsqueeze.default(lse, -1)))
    grad_v = aten.matmul.default(aten.transpose.int(p, -2, -1), grad_out)
    grad_p = aten.matmul.default(grad_out, aten.transpose.int(v, -2, -1))
    row = aten.sum.dim_IntList(aten.mul.Tensor(grad_out, out), [-1], True)
    grad_s = aten.mul.Tensor(p, aten.sub.Tensor(grad_p, row))
    grad_q = aten.mul.Tensor(aten.matmul.default(grad_s, k), factor)
    grad_k = aten.mul.Tensor(aten.matmul.default(aten.transpose.int(grad_s, -2, -1), q), factor)
    return grad_q, _sum_heads(grad_k, groups), _sum_heads(grad_v, groups)


def _attention_scale(q, scale):
    """The factor of the scores: ``scale``, or 1 / sqrt(head size) when None."""
    return scale if scale is not None else 1.0 / (q.shape[-1] ** 0.5)


def _attention_scores(q, k, is_causal, attn_mask, scale):
    """The masked, scaled scores ``q k^T * scale`` [B, H, L, S] of a CPU flash attention (``k``
    with as many heads as ``q``): -inf above the diagonal when causal (top-left aligned, as the
    kernel does), plus a float ``attn_mask``."""
    L, S = q.shape[-2], k.shape[-2]
    s = aten.mul.Tensor(aten.matmul.default(q, aten.transpose.int(k, -2, -1)), _attention_scale(q, scale))
    if is_causal:
        keep = aten.tril.default(aten.full.default([L, S], True, dtype=torch.bool, device=q.device))
        s = aten.where.self(keep, s, aten.full.default([], float("-inf"), dtype=q.dtype, device=q.device))
    if attn_mask is not None:
        s = aten.add.Tensor(s, attn_mask)
    return s


# The most attention scores (batch x heads x queries x keys) a CPU flash attention is lowered for.
# The lowering computes the scores, probabilities and their gradients as whole [B, H, L, S] tensors
# (flash attention's kernel never holds them whole): 2^24 float32 scores are 64 MB each.
ATTENTION_SCORES_LIMIT = 1 << 24


def _check_scores(q, k) -> None:
    """Raise :class:`Refused` when the [B, H, L, S] scores of an attention would be over
    :data:`ATTENTION_SCORES_LIMIT` elements."""
    scores = q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]
    if scores > ATTENTION_SCORES_LIMIT:
        raise Refused(f"attention over {scores} scores (batch x heads x queries x keys) stays with torch's "
                      f"flash kernel: the lowering would hold them whole, at most {ATTENTION_SCORES_LIMIT}")


def _head_groups(q, k, v, dropout_p, is_causal, attn_mask):
    """Return how many query heads share each key/value head in a CPU flash attention call this
    module lowers (1: as many heads; more: grouped-query attention, query head h reading key/value
    head h // groups as ``enable_gqa`` does); None for one it leaves to torch: random dropout, a
    dtype below float32, not 4-D, heads that do not group, causal with more queries than keys (rows
    with no key at all) or a boolean mask (a row masked entirely): there the kernel's convention is
    not the math's. Raises :class:`Refused` past :data:`ATTENTION_SCORES_LIMIT` scores."""
    if dropout_p or q.dtype not in (torch.float32, torch.float64) or q.dim() != 4 or k.dim() != 4 \
            or v.dim() != 4 or k.shape[1] != v.shape[1] or not k.shape[1] or q.shape[1] % k.shape[1]:
        return None
    if (is_causal and q.shape[2] > k.shape[2]) or (attn_mask is not None and attn_mask.dtype == torch.bool):
        return None
    _check_scores(q, k)
    return q.shape[1] // k.shape[1]


def _repeat_heads(x, groups: int):
    """``x`` [B, Hk, S, E] with each head repeated ``groups`` times in place: [B, Hk * groups, S, E]."""
    if groups == 1:
        return x
    b, h, n, e = x.shape
    return aten.reshape.default(aten.expand.default(aten.unsqueeze.default(x, 2), [b, h, groups, n, e]),
                                [b, h * groups, n, e])


def _sum_heads(x, groups: int):
    """The gradient of :func:`_repeat_heads`: ``x`` [B, Hk * groups, S, E] summed over each group."""
    if groups == 1:
        return x
    b, h, n, e = x.shape
    return aten.sum.dim_IntList(aten.view.default(x, [b, h // groups, groups, n, e]), [2])


def _weight_norm_backward(grad_w, v, g, norms, dim):
    """The gradients of weight normalization ``w = v * g / norms`` (``norms``: ``||v||`` over every
    dim but ``dim``, kept, as the forward returned it): ``grad_g = sum(grad_w * v) / norms`` and
    ``grad_v = g / norms * (grad_w - v * grad_g / norms)``. Below float32 (where ATen keeps the
    norms in float32) torch runs the op."""
    if any(t.dtype not in (torch.float32, torch.float64) for t in (grad_w, v, g, norms)) \
            or len({grad_w.dtype, v.dtype, g.dtype, norms.dtype}) != 1:
        return NotImplemented
    other = [i for i in range(v.dim()) if i != dim]
    product = aten.mul.Tensor(grad_w, v)
    grad_g = aten.div.Tensor(aten.sum.dim_IntList(product, other, True) if other else product, norms)
    grad_v = aten.mul.Tensor(aten.div.Tensor(g, norms),
                             aten.sub.Tensor(grad_w, aten.mul.Tensor(v, aten.div.Tensor(grad_g, norms))))
    return grad_v, grad_g


def _replication_pad_backward(dims: int):
    """The gradient of replication padding over the last ``dims`` dims: each output position adds
    its gradient to the input position it copied (the clamped index), one dim at a time."""
    def lower(grad, x, padding):
        g = grad
        for i in range(dims):
            d = x.dim() - 1 - i  # padding lists the last dim first: (left, right, top, bottom ...)
            before, size = padding[2 * i], x.shape[d]
            idx = aten.arange.start_step(0, g.shape[d], 1, dtype=torch.int64, device=g.device)
            idx = aten.clamp.default(aten.sub.Tensor(idx, before), 0, size - 1)
            shape = list(g.shape)
            shape[d] = size
            zeros = aten.full.default(shape, 0, dtype=g.dtype, device=g.device)
            g = aten.index_add.default(zeros, d, idx, g)
        return g
    return lower


def _pool_matrix(out_size: int, in_size: int, like):
    """The [in_size, out_size] matrix of adaptive average pooling along one dim: entry (i, o) is
    1 / window length when input i lies in output o's window [o*I//O, ceil((o+1)*I/O))."""
    o = aten.unsqueeze.default(aten.arange.start_step(0, out_size, 1, dtype=torch.int64, device=like.device), 0)
    i = aten.unsqueeze.default(aten.arange.start_step(0, in_size, 1, dtype=torch.int64, device=like.device), 1)
    start = aten.div.Tensor_mode(aten.mul.Tensor(o, in_size), out_size, rounding_mode="floor")
    end = aten.div.Tensor_mode(aten.add.Tensor(aten.mul.Tensor(o, in_size), in_size + out_size - 1), out_size,
                               rounding_mode="floor")
    inside = aten.logical_and.default(aten.ge.Tensor(i, start), aten.lt.Tensor(i, end))
    weight = aten._to_copy.default(aten.reciprocal.default(aten._to_copy.default(aten.sub.Tensor(end, start),
                                                                                 dtype=torch.float64)),
                                   dtype=like.dtype)
    return aten.where.self(inside, weight, aten.full.default([], 0, dtype=like.dtype, device=like.device))


def _adaptive_avg_pool2d_backward(grad, x):
    """Each input element gets the gradient of every window it lies in, over the window's size:
    ``P_h @ grad @ P_w^T`` with the pooling matrices of both dims."""
    if not grad.is_floating_point():
        return NotImplemented
    ph = _pool_matrix(grad.shape[-2], x.shape[-2], grad)
    pw = _pool_matrix(grad.shape[-1], x.shape[-1], grad)
    return aten.matmul.default(aten.matmul.default(ph, grad), aten.transpose.int(pw, 0, 1))


NN_LOWERINGS = {
    aten._adaptive_avg_pool2d_backward.default: _adaptive_avg_pool2d_backward,
    aten.replication_pad1d_backward.default: _replication_pad_backward(1),
    aten.replication_pad2d_backward.default: _replication_pad_backward(2),
    aten.replication_pad3d_backward.default: _replication_pad_backward(3),
    aten._scaled_dot_product_flash_attention_for_cpu.default: _flash_attention_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _flash_attention_cpu_backward,
    aten._weight_norm_interface_backward.default: _weight_norm_backward,
}
