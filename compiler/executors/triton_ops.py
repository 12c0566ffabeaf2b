"""What the Triton code generator can compute: the prims it supports and their Triton expressions.

Only core ``triton.language`` operations are used (no libdevice): they run both compiled on GPUs and
under the Triton interpreter on CPUs. Functions Triton lacks are written out with care for precision
(``tanh``, ``expm1``, ``log1p`` switch to series or the Goldberg trick near 0). Each op computes in
its "compute dtype" (float32 for half types, as ATen's opmath does) and rounds once to the result
dtype, so results match eager op by op.
"""
from __future__ import annotations

import math
import re
from typing import Callable

import torch

from ..values import float_source, torch_dtype
from .arguments import honoured_table

TL_DTYPE = {"float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16",
            "int64": "tl.int64", "int32": "tl.int32", "int16": "tl.int16", "int8": "tl.int8",
            "uint8": "tl.uint8", "bool": "tl.int1"}
FLOATS = {"float32", "float16", "bfloat16"}
HALF = {"float16", "bfloat16"}

# Unary ops: expression over the operand ``x`` (already in the compute dtype).
UNARY: dict[str, Callable[[str], str]] = {
    "abs": lambda x: f"tl.abs({x})",
    "neg": lambda x: f"-{x}",
    "exp": lambda x: f"tl.exp({x})",
    "exp2": lambda x: f"tl.exp2({x})",
    "log": lambda x: f"tl.log({x})",
    "log2": lambda x: f"tl.log2({x})",
    "log10": lambda x: f"(tl.log({x}) * {1 / math.log(10)!r})",
    "sin": lambda x: f"tl.sin({x})",
    "cos": lambda x: f"tl.cos({x})",
    "sqrt": lambda x: f"tl.sqrt({x})",
    "rsqrt": lambda x: f"(1.0 / tl.sqrt({x}))",
    "reciprocal": lambda x: f"(1.0 / {x})",
    "sigmoid": lambda x: f"(1.0 / (1.0 + tl.exp(-{x})))",
    "erf": lambda x: f"tl.erf({x})",
    "floor": lambda x: f"tl.floor({x})",
    "ceil": lambda x: f"tl.ceil({x})",
    "trunc": lambda x: f"tl.where({x} < 0, tl.ceil({x}), tl.floor({x}))",
    "sign": lambda x: f"tl.where({x} > 0, 1, tl.where({x} < 0, -1, 0)).to({x}.dtype)",
    "isnan": lambda x: f"({x} != {x})",
    # tanh: odd series below 1/8 (error < 1e-9 relative), else via exp(-2|x|) (no overflow).
    "tanh": lambda x: (f"tl.where(tl.abs({x}) < 0.125, {x} * (1.0 - {x} * {x} * (0.3333333333333333 - {x} * {x} * "
                       f"(0.13333333333333333 - {x} * {x} * 0.05396825396825397))), "
                       f"tl.where({x} < 0, -1.0, 1.0) * (1.0 - tl.exp(-2.0 * tl.abs({x}))) / "
                       f"(1.0 + tl.exp(-2.0 * tl.abs({x}))))"),
    "expm1": lambda x: (f"tl.where(tl.abs({x}) < 0.125, {x} * (1.0 + {x} * (0.5 + {x} * (0.16666666666666666 + "
                        f"{x} * (0.041666666666666664 + {x} * 0.008333333333333333)))), tl.exp({x}) - 1.0)"),
    # log1p: Goldberg's trick log(u) * x / (u - 1) with u = 1 + x is accurate to a few ulp.
    "log1p": lambda x: f"tl.where((1.0 + {x}) == 1.0, {x}, tl.log(1.0 + {x}) * {x} / ((1.0 + {x}) - 1.0))",
    # round half to even, like torch.round.
    "round": lambda x: (f"tl.where({x} - tl.floor({x}) == 0.5, tl.where(tl.floor({x}) - 2.0 * tl.floor(tl.floor({x}) * 0.5) == 0.0, "
                        f"tl.floor({x}), tl.floor({x}) + 1.0), tl.floor({x} + 0.5))"),
}
# Unary ops whose operand is taken as bool / integer.
LOGICAL_UNARY = {"logical_not": lambda x: f"({x} == 0)"}
BITWISE_UNARY = {"bitwise_not": lambda x: f"(~{x})"}
FLOAT_ONLY_UNARY = {"exp", "exp2", "log", "log2", "log10", "sin", "cos", "sqrt", "rsqrt", "reciprocal", "sigmoid",
                    "erf", "tanh", "expm1", "log1p", "round", "floor", "ceil", "trunc"}

BINARY: dict[str, Callable[[str, str], str]] = {
    "add": lambda a, b: f"({a} + {b})",
    "sub": lambda a, b: f"({a} - {b})",
    "mul": lambda a, b: f"({a} * {b})",
    "div": lambda a, b: f"({a} / {b})",
    # NaN-propagating like torch.maximum / torch.minimum.
    "maximum": lambda a, b: f"tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})",
    "minimum": lambda a, b: f"tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})",
}
# C's fmod (the dividend's sign) and torch's remainder (the divisor's sign), exact for integers and
# floats (Part.remainder).
REMAINDERS = {"remainder", "fmod"}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGICAL = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}
BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}

REDUCTIONS = {"sum", "amax", "amin", "mean", "var", "any", "all", "argmax", "argmin"}
# argmax/argmin: the first index of the row's max/min (tl.max/tl.min), NaN counting as the extreme
# (torch's rule: the first NaN's index wins).
INDEX_REDUCTIONS = {"argmax": "max", "argmin": "min"}
# any/all reduce their values as nonzero (NaN included) and count as a max/min over 0 and 1.
TRUTH_REDUCTIONS = {"any": ("max", "0"), "all": ("min", "1")}
# Shape prims the generated code absorbs as index arithmetic (views) or copies (clone).
SHAPE = {"view", "expand", "permute", "squeeze", "unsqueeze", "alias", "clone", "slice", "select"}
# Indexing: read memory at loaded indices (gather, embedding), a scalar scatter with one index per
# row (a where), concatenation of virtual values, index_put and scatter_add (atomics, in a phase
# of their own).
INDEXING = {"cat", "gather", "embedding", "scatter", "index_put", "scatter_add", "index", "constant_pad_nd"}
# Ops that write through atomics at loaded indices: each runs as a phase of its own (a copy of
# ``self`` into the output first), in a single-program kernel.
PUTS = {"index_put", "scatter_add"}
# Values computed from their own index alone (virtual, like constants).
ITERATE = {"arange"}
FACTORY = {"full", "scalar_tensor"}
CONVERSION = {"convert_element_type"}
TERNARY = {"where", "clamp"}

SUPPORTED = (set(UNARY) | set(LOGICAL_UNARY) | set(BITWISE_UNARY) | set(BINARY) | REMAINDERS | set(COMPARE) | set(LOGICAL)
             | set(BITWISE) | REDUCTIONS | SHAPE | FACTORY | CONVERSION | TERNARY | INDEXING | ITERATE | {"pow"})


# A number as :func:`literal` writes it into kernel source (an operand that is not a tensor).
LITERAL = re.compile(r"(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|float\('(-?inf|nan)'\)")


def literal(v, dtype: str) -> str:
    """Return Triton source for the Python number ``v`` used in compute dtype ``dtype``."""
    if isinstance(v, bool):
        v = int(v)
    if dtype in FLOATS or dtype == "float64":
        return float_source(float(v))
    if dtype == "bool":
        return "1" if v else "0"
    return repr(int(v))


def compute_dtype(out_dtype: str) -> str:
    """Return the dtype an op with result ``out_dtype`` computes in (float32 for half types)."""
    return "float32" if out_dtype in HALF else out_dtype


def promoted(operands: list) -> str:
    """Return ATen's common dtype of ``operands`` (TensorProxy-likes with shape/dtype, or numbers)."""
    vals = []
    for o in operands:
        if isinstance(o, (bool, int, float)):
            vals.append(o)
        else:
            vals.append(torch.empty(o.shape, dtype=torch_dtype(o.dtype), device="meta"))
    if len(vals) == 1:
        v = vals[0]
        return str(v.dtype).removeprefix("torch.") if isinstance(v, torch.Tensor) else {bool: "bool", int: "int64", float: "float32"}[type(v)]
    dt = torch.result_type(vals[0], vals[1])
    for v in vals[2:]:
        dt = torch.promote_types(dt, torch.result_type(v, v) if isinstance(v, torch.Tensor) else dt)
    return str(dt).removeprefix("torch.")


def pow_expr(x: str, exponent: float, dtype: str) -> str:
    """Return ``x ** exponent`` for a constant exponent (repeated products for small integers)."""
    if exponent == int(exponent) and abs(exponent) <= 4:
        e = int(exponent)
        if e == 0:
            return f"({x} * 0 + 1)"
        prod = " * ".join([x] * abs(e))
        return f"({prod})" if e > 0 else f"(1.0 / ({prod}))"
    if exponent == 0.5:
        return f"tl.sqrt({x})"
    if exponent == -0.5:
        return f"(1.0 / tl.sqrt({x}))"
    if exponent == int(exponent):  # |a| ** b, negated for negative a and odd b
        mag = f"tl.exp({literal(exponent, dtype)} * tl.log(tl.abs({x})))"
        return f"tl.where({x} < 0, -{mag}, {mag})" if int(exponent) % 2 else mag
    # exp(b * log(a)): nan for a < 0 (as torch for non-integer b), 0 / inf for a == 0.
    return f"tl.exp({literal(exponent, dtype)} * tl.log({x}))"

# The schema arguments the generator reads per prim; any other argument must have a value that
# changes nothing, or the executor refuses the op (see :mod:`.arguments`). Output shape, dtype
# and strides come from the result proxy, so ``size``, ``end``, ``keepdim``, ``dtype`` and
# ``memory_format`` are honoured through it.
_FACTORY_ARGS = ("dtype", "device")
HONOURED = honoured_table([
    (set(UNARY) | set(LOGICAL_UNARY) | set(BITWISE_UNARY), ("self",)),
    (set(COMPARE) | set(LOGICAL) | set(BITWISE) | REMAINDERS | {"mul", "maximum", "minimum"}, ("self", "other")),
    (("add", "sub"), ("self", "other", "alpha")),
    (("div",), ("self", "other", "rounding_mode")),
    (("where",), ("condition", "self", "other")),
    (("clamp",), ("self", "min", "max")),
    (("pow",), ("self", "exponent")),
    (("convert_element_type",), ("self", "dtype", "device", "memory_format")),
    (("full",), ("size", "fill_value") + _FACTORY_ARGS),
    (("scalar_tensor",), ("s",) + _FACTORY_ARGS),
    (("arange",), ("start", "end", "step") + _FACTORY_ARGS),
    (("sum", "mean"), ("self", "dim", "keepdim", "dtype")),
    (("amax", "amin", "any", "all", "argmax", "argmin"), ("self", "dim", "keepdim")),
    (("var",), ("self", "dim", "keepdim", "correction", "unbiased")),
    (("view",), ("self", "size")),
    (("expand",), ("self", "size", "implicit")),
    (("permute",), ("self", "dims")),
    (("squeeze", "unsqueeze"), ("self", "dim")),
    (("alias",), ("self",)),
    (("clone",), ("self", "memory_format")),
    (("slice",), ("self", "dim", "start", "end", "step")),
    (("select",), ("self", "dim", "index")),
    (("cat",), ("tensors", "dim")),
    (("constant_pad_nd",), ("self", "pad", "value")),
    (("gather",), ("self", "dim", "index")),
    (("index",), ("self", "indices")),
    (("embedding",), ("weight", "indices", "padding_idx", "scale_grad_by_freq", "sparse")),  # forward value only
    (("scatter",), ("self", "dim", "index", "value", "src")),
    (("index_put",), ("self", "indices", "values", "accumulate")),
    (("scatter_add",), ("self", "dim", "index", "src")),
])
