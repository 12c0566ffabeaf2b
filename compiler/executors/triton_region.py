"""The pieces a Triton kernel part is built from: binding a symbol's ATen arguments by name, the
prim name of a symbol, the iteration domain of a reduction, the kinds of values a part holds
(computed tiles, constants, virtual reads of memory), slice parameters and the launch sizes.

:mod:`.triton_codegen` (which re-exports every name here) generates a part's body from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..ir import BoundSymbol, TensorProxy
from ..resolve import resolve_overload, schema_arguments
from . import triton_ops as ops
from .triton_index import numel


# Ops that only re-index their sources or are constant: they never set a part's iteration domain.
FREE_OPS = frozenset(ops.SHAPE | ops.FACTORY | ops.ITERATE | {"cat", "constant_pad_nd"})


class Unfusable(Exception):
    """The region cannot be one Triton kernel; the message says why (shown as the fusion reason)."""


def bind(b: BoundSymbol) -> dict:
    """Return ``b``'s arguments by schema name (defaults filled) using its ATen overload."""
    return schema_arguments(resolve_overload(b.aten), b.args, b.kwargs)


# ATen ops the executor runs without a decomposition (named like prims in the generator).
ATEN_OPS = {"aten.embedding.default": "embedding"}


def prim_name(b: BoundSymbol) -> str:
    """Return the prim name of ``b`` (``prims.add`` -> ``add``, ``aten.embedding.default`` -> ``embedding``)."""
    return ATEN_OPS.get(b.sym) or b.sym.removeprefix("prims.")


def reduce_dims(b: BoundSymbol, x: TensorProxy) -> list[int]:
    """Return the sorted, normalized dims reduced by reduction ``b`` on input ``x``."""
    a = bind(b)
    dims = a.get("dim")
    rank = len(x.shape)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank if rank else 0 for d in dims})


def reduces_apart(b: BoundSymbol) -> bool:
    """True when reduction ``b`` reduces dims that are neither its input's leading nor trailing
    ones (``x.mean(1)`` of ``[B, T, C]``, BatchNorm's sum over ``[0, 2, 3]``): the kernel runs
    it as :func:`reduced_last` gives it."""
    x = b.args[0]
    dims, rank = reduce_dims(b, x), len(x.shape)
    return len(dims) < rank and dims != list(range(dims[0], rank)) and dims != list(range(len(dims)))


def reduced_last(b: BoundSymbol) -> list[BoundSymbol]:
    """Return reduction ``b`` (see :func:`reduces_apart`) as ``permute`` (the reduced dims moved
    last, the kept ones in order), the reduction of the trailing dims, and a ``view`` back to
    ``b``'s output shape where it keeps dims; same uid, so every line still names ``b``. The
    permute reads the input in place: only a region input can be read so (a value computed in
    the kernel raises Unfusable, and fusion keeps its producer in another kernel)."""
    x, out = b.args[0], b.outputs
    rank = len(x.shape)
    dims = reduce_dims(b, x)
    kept = [d for d in range(rank) if d not in dims]
    shape = tuple(x.shape[d] for d in kept + dims)
    contiguous = tuple(numel(shape[k + 1:]) for k in range(rank))
    like = dict(uid=b.uid, origin=b.origin, source=b.source, seq_nr=b.seq_nr)
    moved = TensorProxy(f"{out.name}_moved", shape, x.dtype, x.device, contiguous)
    permute = BoundSymbol("prims.permute", (x, kept + dims), {}, moved, aten="aten.permute.default", **like)
    a = bind(b)
    del a["self"]
    a.update(dim=list(range(len(kept), rank)), keepdim=False)
    kept_shape = tuple(x.shape[d] for d in kept)
    if tuple(out.shape) == kept_shape:
        return [permute, b.replace(args=(moved,), kwargs=a)]
    flat = TensorProxy(f"{out.name}_kept", kept_shape, out.dtype, out.device,
                       tuple(numel(kept_shape[k + 1:]) for k in range(len(kept_shape))))
    view = BoundSymbol("prims.view", (flat, list(out.shape)), {}, out, aten="aten.view.default", **like)
    return [permute, b.replace(args=(moved,), kwargs=a, outputs=flat), view]


def reduction_domain(b: BoundSymbol) -> tuple[int, int, str]:
    """Return (M rows, N reduced elements, layout) of reduction ``b``; raise Unfusable."""
    x = b.args[0]
    dims = reduce_dims(b, x)
    rank = len(x.shape)
    if len(dims) == rank:
        return 1, numel(x.shape), "inner"
    k = dims[0]
    if dims == list(range(k, rank)):
        return numel(x.shape[:k]), numel(x.shape[k:]), "inner"
    if dims == list(range(0, len(dims))):
        k = len(dims)
        return numel(x.shape[k:]), numel(x.shape[:k]), "outer"
    raise Unfusable(f"{b.sym} reduces dims {dims} of a {list(x.shape)} tensor: only leading or trailing dims")


@dataclass
class Tile:
    """A computed value: the kernel variable, its level and physical tile kind, its dtype."""
    var: str
    level: str
    phys: str
    dtype: str


@dataclass
class Const:
    """A constant tensor value (``full`` / ``scalar_tensor``)."""
    value: Union[int, float, bool]
    dtype: str


@dataclass
class Virtual:
    """A region input, possibly seen through shape ops: read on demand at any index."""
    shape: tuple
    dtype: str
    read: object  # (index, level, extra mask or None) -> expression of the element


def slice_params(b: BoundSymbol, src: TensorProxy) -> tuple[int, int, int]:
    """Return (dim, start, step) of a ``slice`` with its start normalized like Python's slicing."""
    a = bind(b)
    dim = int(a.get("dim") or 0) % len(src.shape)
    size = src.shape[dim]
    start = int(a.get("start") or 0)  # enters the kernel source: an int, never recorded text
    start = max(0, min(size, start + size if start < 0 else start))
    return dim, start, int(a.get("step") or 1)


def select_params(b: BoundSymbol, src: TensorProxy) -> tuple[int, int]:
    """Return (dim, index) of a ``select`` with a negative index counted from the end."""
    a = bind(b)
    dim = int(a.get("dim") or 0) % len(src.shape)
    index = int(a["index"])  # enters the kernel source: an int, never recorded text
    return dim, index + src.shape[dim] if index < 0 else index


def advanced_index_block(indices, x: TensorProxy, out: TensorProxy) -> tuple[int, list, int]:
    """Return (first dim, index tensors, rank of their broadcast shape) of an ``index`` whose
    integer index tensors sit on adjacent dims of ``x`` (``x[:, i]``, ``x[i, j]``): the result is
    ``x``'s dims before them, their broadcast shape, then ``x``'s dims after them. Raise
    Unfusable otherwise (boolean masks, tensors apart: those move the block to the front)."""
    indices = list(indices)
    while indices and indices[-1] is None:
        indices.pop()
    first = next((i for i, t in enumerate(indices) if t is not None), None)
    tensors = indices[first:] if first is not None else []
    if not tensors or any(not isinstance(t, TensorProxy) or t.dtype not in ("int64", "int32") for t in tensors):
        raise Unfusable("index with other than integer index tensors on adjacent dims")
    rank = max(len(t.shape) for t in tensors)
    kept = len(x.shape) - first - len(tensors)
    if kept < 0 or len(out.shape) != first + rank + kept or tuple(out.shape[:first]) != tuple(x.shape[:first]) \
            or tuple(out.shape[first + rank:]) != tuple(x.shape[first + len(tensors):]):
        raise Unfusable("index whose result is not the input's dims around its indices' broadcast shape")
    return first, tensors, rank


def pad_leads(pad, x: TensorProxy) -> dict[int, int]:
    """Return {dim: leading pad} of a ``constant_pad_nd`` of ``x`` (``pad`` pairs from the last dim
    back, as ``F.pad``) for its padded dims; raise Unfusable for a negative pad (a crop) or pads
    beyond ``x``'s dims."""
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > len(x.shape) or not all(isinstance(p, int) and p >= 0 for p in pad):
        raise Unfusable("constant_pad_nd with a negative or non-constant pad")
    rank = len(x.shape)
    return {rank - 1 - k: pad[2 * k] for k in range(len(pad) // 2) if pad[2 * k] or pad[2 * k + 1]}


# On a GPU a row of up to this many elements is reduced in one tile; longer rows are looped.
GPU_ROW_BLOCK = 4096


def block_sizes(kind: str, M: int, N: int, T: int, device_kind: str, layout: str = "inner") -> dict:
    """Return the tile sizes and launch shape: few large programs on CPU (the interpreter costs
    about 1 ms per program), GPU-sized tiles otherwise; on a GPU a reduction whose rows exceed
    :data:`GPU_ROW_BLOCK` walks them in chunks (``looped``): ``[1, 2048]`` tiles along contiguous
    rows (inner), ``[128, 32]`` along contiguous columns (outer)."""
    p2 = lambda n: 1 << max(0, (n - 1).bit_length())  # noqa: E731
    if kind == "pointwise":
        block = min(p2(T), 1 << 16) if device_kind != "cuda" else min(1024, p2(T))
        return {"BLOCK": block, "grid": -(-T // block), "num_warps": 4 if block <= 1024 else 8}
    if device_kind == "cuda" and p2(N) > GPU_ROW_BLOCK:
        bm, bn = (1, 2048) if layout == "inner" else (min(p2(M), 128), 32)
        return {"BM": bm, "BN": bn, "grid": -(-M // bm), "num_warps": 8 if layout == "inner" else 4, "looped": True}
    bn = p2(N)
    cap = (1 << 16) if device_kind != "cuda" else 4096
    bm = max(1, min(p2(M), cap // bn))
    warps = 4 if bm * bn <= 2048 else (8 if bm * bn <= 8192 else 16)
    return {"BM": bm, "BN": bn, "grid": -(-M // bm), "num_warps": warps}
