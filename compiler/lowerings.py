"""Lowerings that complete PyTorch's decomposition table so more ATen ops end in prims.

Two tables, both merged into the table :mod:`.decompositions` traces with:

- :data:`TORCH_PRIM_LOWERINGS`: ``torch.ops.prims`` operators that PyTorch's decompositions emit
  (``prims.broadcast_in_dim``, ``prims.sum`` ...), rewritten into ATen calls that are our prims.
- :data:`ATEN_LOWERINGS`: ATen operators that PyTorch does not decompose, or decomposes into ops
  that are not prims (``as_strided``, ``full_like``, ``empty_permuted``): ``zeros_like``,
  ``split``, ``diagonal``, ``max.dim``, ``take``/``put``, ``scatter_reduce`` (sum, mean) ...
  Those of neural-network layers (attention, weight norm, padding and pooling backward) are
  :data:`.nn_lowerings.NN_LOWERINGS`.

A lowering runs under ``make_fx`` on fake tensors, so it may read shapes, strides and dtypes, and
the ATen ops it calls are decomposed further by the same table until only prims remain. One that
does not apply to the arguments returns ``NotImplemented`` (the op is then what its decomposition
uses) or raises :class:`Refused` with the reason the op stays whole.
"""
from __future__ import annotations

import torch
import torch._decomp
import torch._inductor.inductor_prims  # noqa: F401  (registers prims.fma, lowered below; torch itself imports it only with Dynamo)

from .values import contiguous_strides

aten = torch.ops.aten
tprims = torch.ops.prims


class Refused(Exception):
    """Raised by a lowering that applies to its op but not to these arguments: the message says why
    the op stays whole (it becomes the op's fallback reason)."""


# -- helpers ---------------------------------------------------------------------------------------

def _reduction_dims(x, dims) -> list[int]:
    """``prims.*`` reductions: None means every dim."""
    return list(range(x.dim())) if dims is None else [int(d) for d in dims]


def _dense_perm(x) -> list[int]:
    """Return the dims of ``x`` from outermost to innermost in memory (a stable sort by stride)."""
    return sorted(range(x.dim()), key=lambda d: (-x.stride(d), d))


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _full_with_layout(shape, fill, like, dtype, device):
    """``full`` with the memory layout of ``like`` (the ``*_like`` ops preserve it)."""
    perm = _dense_perm(like) if like is not None and like.dim() == len(shape) else list(range(len(shape)))
    if perm == list(range(len(shape))):
        return aten.full.default(list(shape), fill, dtype=dtype, device=device)
    t = aten.full.default([shape[p] for p in perm], fill, dtype=dtype, device=device)
    return aten.permute.default(t, _inverse(perm))


# -- torch.ops.prims -> prims ----------------------------------------------------------------------

def _broadcast_in_dim(x, shape, broadcast_dimensions):
    view_shape = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        view_shape[d] = x.shape[i]
    if list(x.shape) != view_shape:
        x = aten.view.default(x, view_shape)
    if list(view_shape) != list(shape):
        x = aten.expand.default(x, list(shape))
    return x


def _div(a, b):
    floating = any(isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()) or isinstance(v, float)
                   for v in (a, b))
    return aten.div.Tensor(a, b) if floating else aten.div.Tensor_mode(a, b, rounding_mode="trunc")


def _reduce(op):
    """A ``prims.<reduction>(x, dims, output_dtype=)``: an empty ``dims`` reduces nothing (the ATen
    reductions would read it as 'every dim')."""
    def lower(x, dims, *, output_dtype=None):
        dims = _reduction_dims(x, dims)
        if not dims:
            return aten._to_copy.default(x, dtype=output_dtype) if output_dtype not in (None, x.dtype) else aten.clone.default(x)
        return op(x, dims, output_dtype)
    return lower


def _prims_prod(x, dims, output_dtype):
    # aten.prod reduces one dim at a time; the last dims first so the indices stay valid.
    for d in sorted(dims, reverse=True):
        x = aten.prod.dim_int(x, d, False, dtype=output_dtype)
    return x


def _prims_var(x, dims, correction=1, *, output_dtype=None):
    dims = _reduction_dims(x, dims)
    if not dims:
        return aten.clone.default(x)
    return aten.var.correction(x, dims, correction=correction, keepdim=False)


def _fmax(a, b):
    return aten.where.self(aten.isnan.default(a), b, aten.where.self(aten.isnan.default(b), a, aten.maximum.default(a, b)))


def _fmin(a, b):
    return aten.where.self(aten.isnan.default(a), b, aten.where.self(aten.isnan.default(b), a, aten.minimum.default(a, b)))


def _collapse_view(x, start, end):
    middle = [-1] if x.numel() else [0]
    return aten.view.default(x, list(x.shape[:start]) + middle + list(x.shape[end:]))


def _same_named(name):
    def lower(*args, **kwargs):
        return getattr(aten, name)(*args, **kwargs)
    return lower


TORCH_PRIM_LOWERINGS = {
    tprims.convert_element_type.default: lambda x, dtype: aten._to_copy.default(x, dtype=dtype),
    tprims.broadcast_in_dim.default: _broadcast_in_dim,
    tprims.sum.default: _reduce(lambda x, dims, dt: aten.sum.dim_IntList(x, dims, False, dtype=dt)),
    tprims.prod.default: _reduce(_prims_prod),
    tprims.amax.default: _reduce(lambda x, dims, dt: aten.amax.default(x, dims, False)),
    tprims.amin.default: _reduce(lambda x, dims, dt: aten.amin.default(x, dims, False)),
    tprims.var.default: _prims_var,
    tprims.div.default: _div,
    tprims.squeeze.default: lambda x, dims: aten.squeeze.dims(x, list(dims)),
    tprims.transpose.default: lambda x, perm: aten.permute.default(x, list(perm)),
    tprims.collapse_view.default: _collapse_view,
    tprims.split_dim.default: lambda x, dim, outer: aten.view.default(
        x, list(x.shape[:dim]) + [outer, x.shape[dim] // outer] + list(x.shape[dim + 1:])),
    tprims.reshape.default: lambda x, shape: aten.view.default(x, list(shape)),
    tprims.view_of.default: lambda x: aten.alias.default(x),
    tprims.where.default: lambda c, a, b: aten.where.self(c, a, b),
    tprims.fma.default: lambda a, b, c: aten.add.Tensor(aten.mul.Tensor(a, b), c),
    tprims.fmax.default: _fmax,
    tprims.fmin.default: _fmin,
    tprims.hypot.default: lambda a, b: aten.sqrt.default(aten.add.Tensor(aten.mul.Tensor(a, a), aten.mul.Tensor(b, b))),
}


def add_same_named_prims(is_prim_overload) -> None:
    """Map ``torch.ops.prims.X`` to ``aten.X`` for every elementwise X that is one of our prims."""
    for name in ("add sub mul maximum minimum pow remainder fmod atan2 eq ne lt le gt ge bitwise_and "
                 "bitwise_or bitwise_xor abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos "
                 "atan sinh cosh tanh asinh acosh atanh sqrt rsqrt reciprocal erf erfc erfinv floor ceil "
                 "round trunc sign signbit bitwise_not lgamma digamma nextafter copysign").split():
        ov = getattr(tprims, name, None)
        packet = getattr(aten, name)
        if ov is not None and any(is_prim_overload(getattr(packet, o)) for o in packet.overloads()):
            TORCH_PRIM_LOWERINGS.setdefault(ov.default, _same_named(name))


# -- ATen ops -> ATen ops that end in prims --------------------------------------------------------

def _full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    keep = memory_format in (None, torch.preserve_format)
    return _full_with_layout(x.shape, fill_value, x if keep else None, dtype or x.dtype, device or x.device)


def _empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    perm = list(physical_layout)
    t = aten.empty.memory_format([size[p] for p in perm], dtype=dtype, device=device)
    return aten.permute.default(t, _inverse(perm))


def _efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.full.default(list(size), 0, dtype=dtype, device=device)


def _copy(x, src, non_blocking=False):
    v = src
    if src.dtype != x.dtype or src.device != x.device:
        v = aten._to_copy.default(src, dtype=x.dtype, device=x.device)
    if list(v.shape) != list(x.shape):
        v = aten.expand.default(v, list(x.shape))
    return aten.clone.default(v)


def _fill_tensor(x, value):
    return _copy(x, value)


def _split_sizes(x, sizes, dim):
    dim = dim % max(x.dim(), 1)
    out, start = [], 0
    for s in sizes:
        out.append(aten.slice.Tensor(x, dim, start, start + s))
        start += s
    return out


def _split(x, split_size, dim=0):
    n = x.shape[dim % max(x.dim(), 1)]
    chunks = max((n + split_size - 1) // split_size, 1) if split_size else 1
    sizes = [split_size] * (chunks - 1) + [n - split_size * (chunks - 1)]
    return _split_sizes(x, sizes, dim)


def _copied(fn):
    def lower(*args, **kwargs):
        return [aten.clone.default(t) for t in fn(*args, **kwargs)]
    return lower


def _diagonal_index(x, offset, dim1, dim2):
    """Return (perm, indices) with ``diagonal(x) == index(permute(x, perm), indices)``: the other
    dims first, then the two diagonal dims indexed by aranges."""
    nd = x.dim()
    d1, d2 = dim1 % nd, dim2 % nd
    if offset >= 0:
        length, row, col = max(min(x.shape[d1], x.shape[d2] - offset), 0), 0, offset
    else:
        length, row, col = max(min(x.shape[d1] + offset, x.shape[d2]), 0), -offset, 0
    rest = [d for d in range(nd) if d not in (d1, d2)]
    i = aten.arange.start_step(row, row + length, 1, dtype=torch.int64, device=x.device)
    j = aten.arange.start_step(col, col + length, 1, dtype=torch.int64, device=x.device)
    return rest + [d1, d2], [None] * len(rest) + [i, j]


def _diagonal(x, offset=0, dim1=0, dim2=1):
    perm, index = _diagonal_index(x, offset, dim1, dim2)
    return aten.index.Tensor(aten.permute.default(x, perm), index)


def _diagonal_copy(x, offset=0, dim1=0, dim2=1):
    return aten.clone.default(_diagonal(x, offset, dim1, dim2))


def _diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    perm, index = _diagonal_index(x, offset, dim1, dim2)
    out = aten.index_put.default(aten.permute.default(x, perm), index, src)
    return aten.permute.default(out, _inverse(perm))


def _diagonal_backward(grad, input_sizes, offset, dim1, dim2):
    zeros = aten.full.default(list(input_sizes), 0, dtype=grad.dtype, device=grad.device)
    return _diagonal_scatter(zeros, grad, offset, dim1, dim2)


def _unfold(x, dimension, size, step):
    if x.dim() == 0:
        return aten.view.default(x, [1])  # eager: a 0-dim tensor unfolds to shape [1] (size <= 1)
    d = dimension % x.dim()
    n = (x.shape[d] - size) // step + 1
    starts = aten.mul.Tensor(aten.arange.start_step(0, n, 1, dtype=torch.int64, device=x.device), step)
    offsets = aten.arange.start_step(0, size, 1, dtype=torch.int64, device=x.device)
    index = aten.add.Tensor(aten.unsqueeze.default(starts, 1), aten.unsqueeze.default(offsets, 0))
    picked = aten.index_select.default(x, d, aten.view.default(index, [-1]))
    picked = aten.view.default(picked, list(x.shape[:d]) + [n, size] + list(x.shape[d + 1:]))
    perm = [i for i in range(picked.dim()) if i != d + 1] + [d + 1]
    return aten.permute.default(picked, perm)


def _as_strided(x, size, stride, storage_offset=None):
    """``as_strided`` reads storage, which only a contiguous input at offset 0 maps to its logical
    elements: then it is a ``view`` (same layout) or an ``index`` of the flattened input."""
    offset = x.storage_offset() if storage_offset is None else storage_offset
    if not x.is_contiguous() or x.storage_offset() != 0:
        return NotImplemented  # stays aten.as_strided, run by torch
    size, stride = list(size), list(stride)
    numel = 1
    for s in size:
        numel *= s
    if offset == 0 and numel == x.numel() and all(a == b for a, b, s in zip(stride, contiguous_strides(size), size) if s > 1):
        return aten.view.default(x, size)
    return aten.index.Tensor(aten.view.default(x, [-1]), [_strided_index(x, size, stride, offset)])


def _as_strided_scatter(x, src, size, stride, storage_offset=None):
    """Writes ``src`` where ``as_strided`` would read: an ``index_put`` into the flattened input
    (contiguous inputs at offset 0 only, like :func:`_as_strided`)."""
    offset = x.storage_offset() if storage_offset is None else storage_offset
    if not x.is_contiguous() or x.storage_offset() != 0:
        return NotImplemented
    index = _strided_index(x, list(size), list(stride), offset)
    flat = aten.index_put.default(aten.view.default(x, [-1]), [index], src)
    return aten.view.default(flat, list(x.shape))


def _strided_index(x, size, stride, offset):
    """Return the int64 tensor of shape ``size`` holding the storage offsets ``as_strided`` reads."""
    index = aten.full.default([1] * len(size), offset, dtype=torch.int64, device=x.device)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        step = aten.arange.start_step(0, n * st, st, dtype=torch.int64, device=x.device) if st else \
            aten.full.default([n], 0, dtype=torch.int64, device=x.device)
        index = aten.add.Tensor(index, aten.view.default(step, shape))
    return aten.expand.default(index, size) if size else aten.view.default(index, [])


def _max_dim(reduce, arg):
    def lower(x, dim, keepdim=False):
        # argmax/argmin refuse bool; on 0/1 values uint8 picks the same index.
        xi = aten._to_copy.default(x, dtype=torch.uint8) if x.dtype == torch.bool else x
        return reduce(x, [dim], keepdim), arg(xi, dim, keepdim)
    return lower


def _reduce_all(reduce):
    def lower(x):
        return reduce(x, list(range(x.dim())), False)
    return lower


def _whole_below_float32(op):
    """The lowering of ``addmm`` / ``baddbmm`` (``op``): in bfloat16 or float16 the op stays whole.
    Eager runs it as one GEMM in the inputs' dtype, accumulating in float32 and adding the bias
    before its one rounding; PyTorch's decomposition casts every input to float32 for that (a
    float32 product, float32 copies of activations and weights), and any split into a low-precision
    product and a bias add rounds twice. Other dtypes: PyTorch's decomposition, which casts nothing."""
    torch_decomposition = torch._decomp.decomposition_table[op]

    def lower(x, a, b, *, beta=1, alpha=1):
        if a.dtype in (torch.bfloat16, torch.float16):
            raise Refused(f"{op._opname} in {str(a.dtype).replace('torch.', '')} stays whole: eager computes "
                          "product and bias in one GEMM, rounded once")
        return torch_decomposition(x, a, b, beta=beta, alpha=alpha)
    return lower


def _addbmm(x, batch1, batch2, *, beta=1, alpha=1):
    out = aten.sum.dim_IntList(aten.bmm.default(batch1, batch2), [0])
    if alpha != 1:
        out = aten.mul.Tensor(out, alpha)
    if beta == 0:  # eager ignores the input then, NaNs included
        return out
    return aten.add.Tensor(out, x if beta == 1 else aten.mul.Tensor(x, beta))


def _take(x, index):
    return aten.index.Tensor(aten.reshape.default(x, [-1]), [index])


def _put(x, index, source, accumulate=False):
    flat = aten.index_put.default(aten.reshape.default(x, [-1]), [aten.reshape.default(index, [-1])],
                                  aten.reshape.default(source, [-1]), accumulate)
    return aten.view.default(flat, list(x.shape))


def _scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    """``sum`` and ``mean`` as scatter-adds (``prod``, ``amax``, ``amin`` have no prim: torch)."""
    if reduce not in ("sum", "mean"):
        return NotImplemented
    base = x if include_self else aten.scatter.value(x, dim, index, 0)
    total = aten.scatter_add.default(base, dim, index, src)
    if reduce == "sum":
        return total
    start = aten.full.default(list(x.shape), 1 if include_self else 0, dtype=x.dtype, device=x.device)
    ones = aten.full.default(list(index.shape), 1, dtype=x.dtype, device=x.device)
    count = aten.scatter_add.default(start, dim, index, ones)
    count = aten.where.self(aten.eq.Scalar(count, 0), aten.full.default([], 1, dtype=x.dtype, device=x.device), count)
    if x.is_floating_point():
        return aten.div.Tensor(total, count)
    return aten.div.Tensor_mode(total, count, rounding_mode="floor")


def _isin(elements, test_elements, *, assume_unique=False, invert=False):
    if isinstance(elements, torch.Tensor) and isinstance(test_elements, torch.Tensor) and test_elements.numel() == 0:
        return aten.full.default(list(elements.shape), bool(invert), dtype=torch.bool, device=elements.device)
    hit = aten.any.dim(aten.eq.Tensor(aten.unsqueeze.default(elements, -1), aten.reshape.default(test_elements, [-1])), -1)
    return aten.logical_not.default(hit) if invert else hit


def _angle(x):
    """The angle of a real number: pi below 0, 0 otherwise, NaN kept (complex stays with torch)."""
    if x.is_complex():
        return NotImplemented
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    pi = aten.scalar_tensor.default(3.141592653589793, dtype=dtype, device=x.device)
    zero = aten.scalar_tensor.default(0.0, dtype=dtype, device=x.device)
    r = aten.where.self(aten.lt.Scalar(x, 0), pi, zero)
    if not x.is_floating_point():
        return r
    return aten.where.self(aten.isnan.default(x), x, r)


def _polygamma(n, x):
    return aten.digamma.default(x) if n == 0 else NotImplemented


ATEN_LOWERINGS = {
    aten.full_like.default: _full_like,
    aten.empty_permuted.default: _empty_permuted,
    aten._efficientzerotensor.default: _efficientzerotensor,
    aten.copy.default: _copy,
    aten.fill.Tensor: _fill_tensor,
    aten.split.Tensor: _split,
    aten.unsafe_split.Tensor: _split,
    aten.split_with_sizes.default: lambda x, sizes, dim=0: _split_sizes(x, sizes, dim),
    aten.unsafe_split_with_sizes.default: lambda x, sizes, dim=0: _split_sizes(x, sizes, dim),
    aten.split_with_sizes_copy.default: _copied(lambda x, sizes, dim=0: _split_sizes(x, sizes, dim)),
    aten.split_copy.Tensor: _copied(_split),
    aten.diagonal.default: _diagonal,
    aten.diagonal_copy.default: _diagonal_copy,
    aten.diagonal_scatter.default: _diagonal_scatter,
    aten.diagonal_backward.default: _diagonal_backward,
    aten.unfold.default: _unfold,
    aten.as_strided.default: _as_strided,
    aten.as_strided_scatter.default: _as_strided_scatter,
    aten.take.default: _take,
    aten.put.default: _put,
    aten.scatter_reduce.two: _scatter_reduce,
    aten.isin.Tensor_Tensor: _isin,
    aten.angle.default: _angle,
    aten.polygamma.default: _polygamma,
    aten.max.dim: _max_dim(aten.amax.default, aten.argmax.default),
    aten.min.dim: _max_dim(aten.amin.default, aten.argmin.default),
    aten.max.default: _reduce_all(aten.amax.default),
    aten.min.default: _reduce_all(aten.amin.default),
    aten.addbmm.default: _addbmm,
    aten.addmm.default: _whole_below_float32(aten.addmm.default),
    aten.baddbmm.default: _whole_below_float32(aten.baddbmm.default),
    aten.lift_fresh_copy.default: lambda x: aten.clone.default(x),
    aten._conj.default: lambda x: NotImplemented if x.is_complex() else aten.alias.default(x),
}
