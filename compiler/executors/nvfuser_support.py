"""What the nvFuser executor lowers: the dtypes and prims it takes, the schema arguments it honours,
why it leaves the other prims to other executors, and each prim's ATen arguments by name.

The lowering itself is :mod:`.nvfuser_lowering` (which re-exports every name here).
"""
from __future__ import annotations

from ..ir import BoundSymbol, TensorProxy
from ..prims import PRIMS
from ..resolve import recorded_overload, schema_arguments
from .arguments import honoured_table

# torch dtype name -> nvFuser DataType member. Complex and 8/16-bit integer types are left out:
# the executor hands them to torch instead of guessing at nvFuser's support for them.
DATATYPE = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int64": "Int", "int32": "Int32", "bool": "Bool",
}
_LOW_PRECISION = ("float16", "bfloat16")
_FLOATING = ("float16", "bfloat16", "float32", "float64")

# prim name -> nvFuser op name, by how the prim is lowered.
UNARY = {n: n for n in """abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos atan sinh
cosh tanh asinh acosh atanh sqrt rsqrt reciprocal sigmoid erf erfc erfinv floor ceil round trunc
sign bitwise_not lgamma isnan signbit logical_not""".split()}
BINARY = {n: n for n in """add sub mul div pow maximum minimum remainder fmod atan2 eq ne lt le gt ge
logical_and logical_or bitwise_and bitwise_or bitwise_xor nextafter""".split()}
BINARY["logical_xor"] = "ne"  # on bools, xor is inequality
_COMPARISON = {"eq", "ne", "lt", "le", "gt", "ge"}
_LOGICAL = {"logical_and", "logical_or", "logical_xor", "logical_not"}
_BOOL_RESULT_UNARY = {"isnan", "signbit"}
_ROUNDING = {"floor", "ceil", "round", "trunc"}  # identity on integers
REDUCTIONS = {"sum", "prod", "amax", "amin", "mean", "var", "any", "all"}
SHAPE_OPS = {"view", "expand", "permute", "squeeze", "unsqueeze", "slice", "cat", "clone", "alias",
             "select", "constant_pad_nd"}
OTHER = {"where", "clamp", "convert_element_type", "full", "scalar_tensor"}
SUPPORTED = set(UNARY) | set(BINARY) | REDUCTIONS | SHAPE_OPS | OTHER

# The schema arguments the lowering reads per prim; any other argument must have a value that
# changes nothing, or the prim is refused (see :mod:`.arguments`). Result shape and dtype come from
# the output proxy, so ``size``, ``end``, ``keepdim`` and ``dtype`` are honoured through it.
HONOURED = honoured_table([
    (UNARY, ("self",)),
    (BINARY, ("self", "other", "exponent")),
    (("add", "sub"), ("alpha",)),
    (("div",), ("rounding_mode",)),
    (("where",), ("condition", "self", "other")),
    (("clamp",), ("self", "min", "max")),
    (REDUCTIONS, ("self", "dim", "keepdim", "dtype")),
    (("var",), ("correction", "unbiased")),
    (("convert_element_type",), ("self", "dtype", "device")),
    (("full",), ("size", "fill_value", "dtype", "device")),
    (("scalar_tensor",), ("s", "dtype", "device")),
    (("view",), ("self", "size")),
    (("expand",), ("self", "size", "implicit")),
    (("permute",), ("self", "dims")),
    (("squeeze", "unsqueeze"), ("self", "dim")),
    (("clone", "alias"), ("self",)),
    (("slice",), ("self", "dim", "start", "end", "step")),
    (("select",), ("self", "dim", "index")),
    (("cat",), ("tensors", "dim")),
    (("constant_pad_nd",), ("self", "pad", "value")),
])

# Why the prims this executor leaves to others are left there (shown as the fallback reason).
_KIND_REASONS = {
    "matmul": "matmuls stay with torch (cuBLAS)",
    "rng": "random numbers must come from torch's generator to match eager",
    "indexing": "indexing ops are not lowered to nvFuser by this executor",
    "constant": "constant data is made by torch (no kernel needed)",
}
_PRIM_REASONS = {
    "argmax": "index reductions are not lowered to nvFuser by this executor",
    "argmin": "index reductions are not lowered to nvFuser by this executor",
    "flip": "nvFuser has no flip op",
    "index_select": "indexing ops are not lowered to nvFuser by this executor",
    "gather": "indexing ops are not lowered to nvFuser by this executor",
    "digamma": "nvFuser has no digamma op",
    "copysign": "nvFuser has no copysign op",
    "empty": "empty allocates uninitialized memory; torch does that without a kernel",
    "empty_strided": "empty allocates uninitialized memory; torch does that without a kernel",
    "iota": "iota/arange are not lowered to nvFuser by this executor",
    "arange": "iota/arange are not lowered to nvFuser by this executor",
}


class NvFuserLoweringError(Exception):
    """A prim (with these arguments) has no lowering to nvFuser; the message says why."""


def overload_of(b: BoundSymbol):
    """Return the ATen overload a prim symbol stands for (its recorded ``aten``, else the default)."""
    ov = recorded_overload(b)
    if ov is not None:
        return ov
    prim = PRIMS.get(b.sym.removeprefix("prims."))
    if prim is None:
        raise NvFuserLoweringError(f"{b.sym} is not a prim")
    names = prim.packet.overloads()
    if not names:
        raise NvFuserLoweringError(f"{b.sym} has no ATen overload")
    return getattr(prim.packet, "default" if "default" in names else names[0])


def bind_arguments(b: BoundSymbol) -> tuple[str, dict]:
    """Return (overload name, {schema argument name: value}) with ATen defaults filled in."""
    ov = overload_of(b)
    return ov._overloadname, schema_arguments(ov, b.args, b.kwargs)


def _is_cuda(p: TensorProxy) -> bool:
    return p.device.startswith("cuda")

