"""What the Triton generator refuses among the indexing ops, and why: slices with a step below 1,
selects at a non-constant index, cats of mixed dtypes, gathers, embeddings, pads and advanced
indexing it cannot read, and the ops that write at loaded indices (``scatter`` of a scalar,
``scatter_add``, ``index_put``) where there is no atomic add or the shapes do not line up. The
executor's :meth:`~.triton_executor.TritonExecutor.problem` asks here for these ops.
"""
from __future__ import annotations

from typing import Optional

from ..ir import TensorProxy
from .triton_region import Unfusable, advanced_index_block, pad_leads


def indexing_problem(name: str, a: dict, out: TensorProxy) -> Optional[str]:
    """Return why the generator cannot run indexing / slicing op ``name`` (None when it can)."""
    if name in ("scatter", "scatter_add", "index_put"):
        return _write_problem(name, a, out)
    if name == "slice":
        return None if isinstance(a.get("step") or 1, int) and (a.get("step") or 1) > 0 else "slice with a step below 1"
    if name == "select":
        index = a.get("index")
        return None if isinstance(index, int) and not isinstance(index, bool) else "select at a non-constant index"
    if name == "cat":
        if any(not isinstance(x, TensorProxy) or x.dtype != out.dtype for x in a["tensors"]):
            return "cat of tensors of other dtypes than its result"
        return None
    if name == "gather":
        return None if a["index"].shape == out.shape else "gather whose index has another shape than its result"
    if name == "embedding":
        w, idx = a["weight"], a["indices"]
        if len(w.shape) != 2 or idx.dtype not in ("int64", "int32") or tuple(out.shape) != tuple(idx.shape) + (w.shape[1],):
            return "embedding of a weight that is not 2-D, or with non-integer indices"
        return None
    if name == "constant_pad_nd":
        if not isinstance(a.get("value") or 0, (int, float, bool)):
            return "constant_pad_nd with a non-constant value"
        try:
            pad_leads(a["pad"], a["self"])
        except Unfusable as e:
            return str(e)
        return None
    if name == "index":
        try:
            advanced_index_block(a["indices"], a["self"], out)
        except Unfusable as e:
            return str(e)
        return None
    return None
    if name == "index_put":
        values = a["values"]
        if not isinstance(values, TensorProxy):
            return "index_put of a scalar value is left to torch"
        try:
            advanced_index_block(a["indices"], out, values)
        except Unfusable:
            return ("index_put with other than integer index tensors on adjacent dims, or with broadcast "
                    "values, is left to torch")
        if a.get("accumulate") and out.dtype not in ("float32", "int32"):
            return f"index_put accumulating {out.dtype} (no atomic add) is left to torch"
        return None


def _write_problem(name: str, a: dict, out: TensorProxy) -> Optional[str]:
    """Return why the generator cannot run ``scatter``, ``scatter_add`` or ``index_put`` (None when
    it can): the ops that write at loaded indices."""
    if name == "scatter":
        x, idx, dim = a["self"], a["index"], a["dim"]
        if not isinstance(a.get("value"), (int, float, bool)) or not isinstance(x, TensorProxy):
            return "scatter of a tensor source is left to torch (only a scalar value is generated)"
        dim %= max(len(x.shape), 1)
        if idx.shape[dim] != 1 or any(i != s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != dim) \
                or len(idx.shape) != len(x.shape):
            return "scatter with other than one index per row along its dim is left to torch"
        return None
    if name == "scatter_add":
        index, src, base = a["index"], a["src"], a["self"]
        if not (isinstance(index, TensorProxy) and isinstance(src, TensorProxy)) or index.dtype not in ("int64", "int32"):
            return "scatter_add with other than an integer index tensor and a source tensor is left to torch"
        if out.dtype not in ("float32", "int32"):
            return f"scatter_add of {out.dtype} (no atomic add) is left to torch"
        if len(index.shape) != len(out.shape) or len(src.shape) != len(out.shape) or not out.shape:
            return "scatter_add whose index, source and input differ in rank is left to torch"
        dim = a["dim"] % len(out.shape)
        if any(i > s for i, s in zip(index.shape, src.shape)) or any(
                i > o for d, (i, o) in enumerate(zip(index.shape, out.shape)) if d != dim):
            return "scatter_add with an index larger than its source or input is left to torch"
        if 0 in index.shape:
            return "empty tensors are left to torch"
        return None
    return None
