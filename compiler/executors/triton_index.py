"""Index arithmetic for the Triton code generator: expressions that map a tile element to the
element of a value (row-major linear index or per-dim indices) and to a memory offset through the
recorded strides, with broadcasting."""
from __future__ import annotations

import math

from ..ir import TensorProxy
from ..values import contiguous_strides, is_dense


def numel(shape) -> int:
    """Return the number of elements of ``shape``."""
    return math.prod(shape)


Index = tuple  # ("lin", expr): linear index into the value's own shape, or ("dims", [expr, ...])


def unravel(var: str, shape) -> list[str]:
    """Return per-dim index expressions of the row-major linear index ``var`` in ``shape``."""
    if var == "0":
        return ["0"] * len(shape)
    if not (var.isidentifier() or var.startswith("(")):
        var = f"({var})"
    out, first = [], True
    for d, size in enumerate(shape):
        inner = numel(shape[d + 1:])
        if size == 1:
            out.append("0")
            continue
        e = var if inner == 1 else f"({var} // {inner})"
        if not first:
            e = f"({e} % {size})"
        first = False
        out.append(e)
    return out


def as_dims(idx: Index, shape) -> list[str]:
    """Return ``idx`` as per-dim expressions in ``shape``."""
    return unravel(idx[1], shape) if idx[0] == "lin" else list(idx[1])


def linear(idx: Index, shape) -> str:
    """Return ``idx`` as a row-major linear index expression in ``shape``."""
    if idx[0] == "lin":
        return idx[1]
    terms = [f"{e} * {numel(shape[d + 1:])}" if numel(shape[d + 1:]) != 1 else e
             for d, e in enumerate(idx[1]) if e != "0"]
    if len(terms) > 1:
        return "(" + " + ".join(terms) + ")"
    return terms[0] if terms else "0"


def offset(idx: Index, shape, strides) -> str:
    """Return the memory offset expression of ``idx`` in a tensor of ``shape`` and ``strides``."""
    if idx[0] == "lin" and _same_layout(shape, strides, contiguous_strides(shape)):
        return idx[1]
    terms = []
    for e, size, st in zip(as_dims(idx, shape), shape, strides):
        if e == "0" or st == 0 or size == 1:
            continue
        terms.append(e if st == 1 else f"{e} * {st}")
    return " + ".join(terms) or "0"


def broadcast_index(idx: Index, shape, out_shape) -> Index:
    """Return the index into an operand of ``shape`` broadcast to ``out_shape`` at ``idx``."""
    if numel(shape) == numel(out_shape):
        if idx[0] == "lin":
            return idx
        return ("dims", list(idx[1])[len(out_shape) - len(shape):])
    dims = as_dims(idx, out_shape)
    off = len(out_shape) - len(shape)
    return ("dims", [dims[off + i] if shape[i] == out_shape[off + i] else "0" for i in range(len(shape))])


def _same_layout(shape, a, b) -> bool:
    return all(x == y for s, x, y in zip(shape, a, b) if s != 1)


def strides_of(p: TensorProxy) -> tuple:
    """Return ``p``'s recorded strides, or row-major ones when unknown."""
    return tuple(p.strides) if p.strides is not None else contiguous_strides(p.shape)


def row_compatible(shape, out_shape, M: int, layout: str) -> bool:
    """Return True when a per-row value of ``shape`` broadcast to ``out_shape`` is indexed by the row."""
    pad = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    if len(pad) != len(out_shape):
        return False
    for k in range(len(out_shape) + 1):
        if layout == "inner" and numel(out_shape[:k]) == M and pad[:k] == tuple(out_shape[:k]) \
                and all(s == 1 for s in pad[k:]):
            return True
        if layout == "outer" and numel(out_shape[k:]) == M and pad[k:] == tuple(out_shape[k:]) \
                and all(s == 1 for s in pad[:k]):
            return True
    return False


def out_strides(p: TensorProxy) -> tuple:
    """Return the strides an output is allocated with: its recorded ones when dense, else dense
    strides in the recorded dims' memory order (:func:`dense_strides_like`)."""
    st = strides_of(p)
    return st if is_dense(p.shape, st) else dense_strides_like(p.shape, st)


def dense_strides_like(shape, strides) -> tuple:
    """Return dense strides for ``shape`` that keep the memory order of ``strides``: dims with larger
    strides stay outer, broadcast (stride 0) dims outermost, ties in dim order.

    A fused output recorded as a strided view (a slice of a fused ``qkv`` projection, transposed) is
    written densely, but in the layout the view had: the ops downstream that follow their input's
    layout (``scaled_dot_product_attention``'s output) then produce what eager produced, and the
    ``view`` calls recorded after them stay valid.
    """
    order = sorted(range(len(shape)), key=lambda d: (strides[d] != 0, -strides[d], d))
    out = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc *= max(int(shape[d]), 1)
    return tuple(out)
