"""Values of a generated nvFuser program and ATen's rules for them: the value record, the computation
dtype (opmath), scalar literals converted the way ATen converts them, type promotion of operands,
dim normalisation and the names a program may not use.
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..ir import TensorProxy
from ..values import float_source, torch_dtype
from .nvfuser_support import _FLOATING, _LOW_PRECISION, DATATYPE, NvFuserLoweringError


@dataclass(frozen=True)
class _Val:
    """An nvFuser value in the program: its variable name, shape and torch dtype name."""

    var: str
    shape: tuple
    dtype: str


def _opmath(dtype: str) -> str:
    return "float32" if dtype in _LOW_PRECISION else dtype


def _dt(dtype: str) -> str:
    return f"DataType.{DATATYPE[dtype]}"


def _literal(value, dtype: str) -> str:
    """Return Python source for ``value`` converted the way ATen converts a scalar to ``dtype``."""
    if dtype == "bool":
        return repr(bool(value))
    if dtype in _FLOATING:
        return float_source(float(value))
    if isinstance(value, float) and not value.is_integer():
        raise NvFuserLoweringError(f"scalar {value!r} cannot be an integer operand")
    return repr(int(value))


def _meta(x):
    """Tensor proxies as meta tensors of the same rank (rank matters to ATen's promotion)."""
    if isinstance(x, (TensorProxy, _Val)):
        return torch.empty([1] * len(x.shape), dtype=torch_dtype(x.dtype), device="meta")
    return x


def _promoted(operands) -> str:
    """Return ATen's promoted dtype name of tensors and Python scalars (rank-aware)."""
    if not any(isinstance(o, (TensorProxy, _Val)) for o in operands):
        raise NvFuserLoweringError("an elementwise op needs at least one tensor operand")
    _, result = elementwise_dtypes(*[_meta(o) for o in operands],
                                   type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return str(result).removeprefix("torch.")


def _norm_dim(d: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise NvFuserLoweringError(f"dim {d} out of range for rank {ndim}")
    return d % n


def _reserved(name: str) -> bool:
    return keyword.iskeyword(name) or name in ("fd", "DataType", "FusionDefinition", "float", "None",
                                               "True", "False")



_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "bool": "b8"}
