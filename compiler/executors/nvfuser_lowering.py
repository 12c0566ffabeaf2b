"""nvFuser lowering of single prims: ATen semantics spelled out as nvFuser ops.

Our prims have ATen semantics; nvFuser ops do not broadcast implicitly across shapes, do not promote
types the way ATen does and take reduction dims as explicit lists. So each prim's lowering spells
every ATen rule out:

- broadcasting: an operand whose shape differs from the result is ``broadcast_in_dim``-ed to it;
- type promotion: operands are cast to the computation dtype (fp16/bf16 compute in fp32, as
  ATen's opmath does) and the result is cast to the prim's output dtype;
- scalars become ``fd.define_scalar(value, dtype=<computation dtype>)``, as ATen converts them;
- reductions get normalized non-negative dims, ``keepdim``, and an fp32 accumulator for fp16/bf16.

:func:`lowering_problem` says, per prim and dtype, why a prim cannot be lowered (None when it can).
:mod:`.nvfuser_codegen` assembles the lowered prims of a region into a FusionDefinition program.
"""
from __future__ import annotations

import keyword
import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..ir import BoundSymbol, TensorProxy
from ..prims import PRIMS
from ..resolve import UnknownSymbol, resolve_overload
from .arguments import dropped_argument, honoured_table

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
    if b.aten:
        try:
            return resolve_overload(b.aten)
        except UnknownSymbol:
            pass
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
    schema = ov._schema
    bound: dict = {}
    for i, a in enumerate(schema.arguments):
        if i < len(b.args) and not a.kwarg_only:
            bound[a.name] = b.args[i]
        elif a.name in b.kwargs:
            bound[a.name] = b.kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
        else:
            bound[a.name] = None
    return ov._overloadname, bound


def _is_cuda(p: TensorProxy) -> bool:
    return p.device.startswith("cuda")


def lowering_problem(b: BoundSymbol) -> Optional[str]:
    """Return why prim ``b`` cannot be lowered to nvFuser (device, dtype, op or arguments), or None."""
    if not b.sym.startswith("prims."):
        return f"nvfuser lowers prims only, not {b.sym}"
    name = b.sym.removeprefix("prims.")
    prim = PRIMS.get(name)
    if prim is None:
        return f"{b.sym} is not a prim"
    if name not in SUPPORTED:
        return f"nvfuser: {_PRIM_REASONS.get(name) or _KIND_REASONS.get(prim.kind) or f'no nvFuser lowering for {name}'}"
    ins, outs = b.flat_inputs(), b.flat_outputs()
    for p in ins + outs:
        if p.dtype not in DATATYPE:
            return f"nvfuser: dtype {p.dtype} of {p.name} has no nvFuser lowering here"
        if not _is_cuda(p) and not (p in ins and p.device == "cpu" and not p.shape):
            return f"nvfuser: {p.name} is on {p.device}; nvFuser runs CUDA tensors (and CPU scalars)"
    if len(outs) != 1:
        return f"nvfuser: {b.sym} must produce one tensor"
    try:
        _Generator.check_one(b)  # its own, more specific reasons first
        _, bound = bind_arguments(b)
    except NvFuserLoweringError as e:
        return f"nvfuser: {e}"
    return dropped_argument("nvfuser", b.sym, b.aten, bound, HONOURED.get(name, ()))


# ---------------------------------------------------------------------------------------------------
# The generator


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
        v = float(value)
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(value, float) and not value.is_integer():
        raise NvFuserLoweringError(f"scalar {value!r} cannot be an integer operand")
    return repr(int(value))


def _meta(x):
    """Tensor proxies as meta tensors of the same rank (rank matters to ATen's promotion)."""
    if isinstance(x, TensorProxy):
        return torch.empty([1] * len(x.shape), dtype=getattr(torch, x.dtype), device="meta")
    if isinstance(x, _Val):
        return torch.empty([1] * len(x.shape), dtype=getattr(torch, x.dtype), device="meta")
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


class _Generator:
    """Emits the body of one FusionDefinition function."""

    def __init__(self, taken: set[str]):
        self.lines: list[str] = []
        self.env: dict[str, _Val] = {}
        self.taken = set(taken)
        self.ops: list[str] = []  # nvFuser ops used, in order (for tests and the record)
        self.n_scalars = 0
        self.memo: dict = {}  # casts and broadcasts already emitted

    @classmethod
    def check_one(cls, b: BoundSymbol) -> None:
        """Lower ``b`` alone over fresh inputs; raise NvFuserLoweringError when it cannot be."""
        g = cls({p.name for p in b.flat_inputs() + b.flat_outputs()})
        for p in dict.fromkeys(b.flat_inputs()):
            g.define_input(p, ([], [], []))
        g.lower(b)

    # -- names and values ----------------------------------------------------------------------
    def var_for(self, proxy_name: str) -> str:
        """Return the program variable for a proxy (its own name unless that is reserved)."""
        return proxy_name + "_" if _reserved(proxy_name) else proxy_name

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken or _reserved(name):
            name = f"{base}_{i}"
            i += 1
        self.taken.add(name)
        return name

    def emit(self, var: str, expr: str, shape, dtype: str, op: Optional[str] = None) -> _Val:
        self.lines.append(f"{var} = {expr}")
        if op:
            self.ops.append(op)
        return _Val(var, tuple(shape), dtype)

    def temp(self, base: str, expr: str, shape, dtype: str, op: Optional[str] = None) -> _Val:
        return self.emit(self.fresh(base), expr, shape, dtype, op)

    def define_input(self, p: TensorProxy, descriptor: tuple) -> None:
        """Emit ``define_tensor`` for a region input, given its nvFuser (shape, contiguity,
        stride_order) descriptor."""
        if p.dtype not in DATATYPE:
            raise NvFuserLoweringError(f"dtype {p.dtype} of {p.name} has no nvFuser DataType here")
        sym, contig, order = descriptor
        is_cpu = p.device == "cpu"
        var = self.var_for(p.name)
        self.taken.add(var)
        self.env[p.name] = self.emit(
            var, f"fd.define_tensor(shape={sym}, contiguity={contig}, dtype={_dt(p.dtype)}, "
                 f"is_cpu={is_cpu}, stride_order={order})", p.shape, p.dtype)

    def value(self, p: TensorProxy) -> _Val:
        v = self.env.get(p.name)
        if v is None:
            raise NvFuserLoweringError(f"{p.name} is used before it is defined in the region")
        return v

    def scalar(self, value, dtype: str) -> _Val:
        if isinstance(value, complex):
            raise NvFuserLoweringError("complex scalars are not lowered")
        if not isinstance(value, (bool, int, float)):
            raise NvFuserLoweringError(f"operand {value!r} is neither a tensor nor a number")
        self.n_scalars += 1
        return self.temp(f"s{self.n_scalars - 1}", f"fd.define_scalar({_literal(value, dtype)}, dtype={_dt(dtype)})", (), dtype)

    def cast(self, v: _Val, dtype: str) -> _Val:
        if v.dtype == dtype:
            return v
        key = ("cast", v.var, dtype)
        if key not in self.memo:  # one cast per value and dtype, reused by later prims
            self.memo[key] = self.temp(f"{v.var}_{_SHORT[dtype]}", f"fd.ops.cast({v.var}, dtype={_dt(dtype)})",
                                       v.shape, dtype, "cast")
        return self.memo[key]

    def broadcast(self, v: _Val, shape) -> _Val:
        shape = tuple(shape)
        if v.shape == shape:
            return v
        nd, vd = len(shape), len(v.shape)
        if vd > nd or any(s not in (1, t) for s, t in zip(v.shape, shape[nd - vd:])):
            raise NvFuserLoweringError(f"shape {list(v.shape)} does not broadcast to {list(shape)}")
        key = ("broadcast", v.var, shape)
        if key not in self.memo:
            dims = list(range(nd - vd, nd))
            self.memo[key] = self.temp(f"{v.var}_b", f"fd.ops.broadcast_in_dim({v.var}, shape={list(shape)}, "
                                                     f"broadcast_dims={dims})", shape, v.dtype, "broadcast_in_dim")
        return self.memo[key]

    def operand(self, x, dtype: str, shape) -> _Val:
        """A tensor or scalar operand, cast to ``dtype`` and broadcast to ``shape``."""
        if isinstance(x, TensorProxy):
            return self.broadcast(self.cast(self.value(x), dtype), shape)
        return self.scalar(x, dtype)

    def finish(self, out: TensorProxy, expr: str, comp: str, op: str, shape=None) -> None:
        """Bind ``out`` to ``expr`` (whose dtype is ``comp``), casting to ``out``'s dtype if needed."""
        var = self.var_for(out.name)
        self.taken.add(var)
        shape = out.shape if shape is None else shape
        if comp == out.dtype:
            self.env[out.name] = self.emit(var, expr, shape, comp, op)
        else:
            tmp = self.temp(f"{var}_{_SHORT[comp]}", expr, shape, comp, op)
            self.env[out.name] = self.emit(var, f"fd.ops.cast({tmp.var}, dtype={_dt(out.dtype)})",
                                           shape, out.dtype, "cast")

    def bind_same(self, out: TensorProxy, v: _Val) -> None:
        """``out`` is a copy of ``v`` (alias, clone, no-op reshape): a ``set``, cast if needed."""
        if v.dtype != out.dtype:
            self.finish(out, f"fd.ops.cast({v.var}, dtype={_dt(out.dtype)})", out.dtype, "cast")
            self.memo.setdefault(("cast", v.var, out.dtype), self.env[out.name])
        else:
            self.finish(out, f"fd.ops.set({v.var})", out.dtype, "set")

    # -- lowering --------------------------------------------------------------------------------
    def lower(self, b: BoundSymbol) -> None:
        """Emit the nvFuser ops computing prim ``b``'s output."""
        name = b.sym.removeprefix("prims.")
        outs = b.flat_outputs()
        if len(outs) != 1:
            raise NvFuserLoweringError(f"{b.sym} must produce one tensor")
        out = outs[0]
        if out.dtype not in DATATYPE:
            raise NvFuserLoweringError(f"dtype {out.dtype} has no nvFuser DataType here")
        overload, args = bind_arguments(b)
        if name in UNARY or name in BINARY or name in ("where", "clamp"):
            self._elementwise(name, overload, args, out)
        elif name in REDUCTIONS:
            self._reduction(name, overload, args, out)
        elif name in SHAPE_OPS:
            self._shape(name, overload, args, out)
        elif name == "convert_element_type":
            self._convert(args, out)
        elif name in ("full", "scalar_tensor"):
            value = args.get("fill_value", args.get("s"))
            s = self.scalar(value, out.dtype)
            self.finish(out, f"fd.ops.full(shape={list(out.shape)}, fill_value={s.var}, "
                             f"dtype={_dt(out.dtype)})", out.dtype, "full")
        else:
            raise NvFuserLoweringError(f"no nvFuser lowering for {name}")

    def _elementwise(self, name: str, overload: str, args: dict, out: TensorProxy) -> None:
        schema_args = list(args.items())
        if name in UNARY:
            operands = [schema_args[0][1]]
        elif name == "where":
            operands = [schema_args[0][1], schema_args[1][1], schema_args[2][1]]
        elif name == "clamp":
            operands = [args["self"]]
        else:
            operands = [schema_args[0][1], schema_args[1][1]]
        if not any(isinstance(o, TensorProxy) for o in operands):
            raise NvFuserLoweringError(f"{name} needs a tensor operand")
        shape = out.shape

        if name == "where":
            cond = self.operand(operands[0], "bool", shape)
            a = self.operand(operands[1], out.dtype, shape)
            c = self.operand(operands[2], out.dtype, shape)
            self.finish(out, f"fd.ops.where({cond.var}, {a.var}, {c.var})", out.dtype, "where")
            return
        if name == "clamp":
            comp = out.dtype
            v = self.operand(operands[0], comp, shape)
            lo, hi = args.get("min"), args.get("max")
            if lo is None and hi is None:
                raise NvFuserLoweringError("clamp without bounds")
            steps = [(op, bound) for op, bound in (("maximum", lo), ("minimum", hi)) if bound is not None]
            for i, (op, bound) in enumerate(steps):
                bv = self.operand(bound, comp, shape)
                expr = f"fd.ops.{op}({v.var}, {bv.var})"
                if i == len(steps) - 1:
                    self.finish(out, expr, comp, op)
                else:
                    v = self.temp(f"{self.var_for(out.name)}_{op[:3]}", expr, shape, comp, op)
            return

        # Computation dtype: float results compute in opmath (fp32 for fp16/bf16), logical ops on
        # bools, comparisons and integer results in ATen's promoted dtype.
        if name in _LOGICAL:
            comp = "bool"
        elif out.dtype in _FLOATING and name not in _BOOL_RESULT_UNARY:
            comp = _opmath(out.dtype)
        else:
            comp = _opmath(_promoted(operands))
        if comp not in DATATYPE:
            raise NvFuserLoweringError(f"computation dtype {comp} has no nvFuser DataType here")

        if name in UNARY:
            v = self.operand(operands[0], comp, shape)
            if name in _ROUNDING and comp not in _FLOATING:
                self.bind_same(out, v)  # floor/ceil/round/trunc of an integer is the integer
                return
            if name in ("sign", "abs") and comp == "bool":
                self.bind_same(out, v)
                return
            if name == "bitwise_not" and comp == "bool":
                self.finish(out, f"fd.ops.logical_not({v.var})", comp, "logical_not")
                return
            result = "bool" if name in _BOOL_RESULT_UNARY or name in _LOGICAL else comp
            self.finish(out, f"fd.ops.{UNARY[name]}({v.var})", result, UNARY[name])
            return

        a = self.operand(operands[0], comp, shape)
        if name in ("add", "sub") and args.get("alpha", 1) != 1:
            alpha = self.scalar(args["alpha"], comp)
            bv = self.operand(operands[1], comp, shape)
            c = self.temp(f"{bv.var}_alpha", f"fd.ops.mul({bv.var}, {alpha.var})", shape, comp, "mul")
        else:
            c = self.operand(operands[1], comp, shape)
        if name == "div":
            mode = args.get("rounding_mode")
            if mode is not None and comp not in _FLOATING:
                if mode == "trunc":  # nvFuser's integer div truncates, like C
                    self.finish(out, f"fd.ops.div({a.var}, {c.var})", comp, "div")
                    return
                raise NvFuserLoweringError("integer division with rounding_mode='floor' is not lowered")
            if mode in ("trunc", "floor"):
                q = self.temp(f"{self.var_for(out.name)}_q", f"fd.ops.div({a.var}, {c.var})", shape, comp, "div")
                self.finish(out, f"fd.ops.{mode}({q.var})", comp, mode)
                return
            if comp not in _FLOATING:
                raise NvFuserLoweringError("true division of integers must produce a float")
        op = BINARY[name]
        result = "bool" if name in _COMPARISON or name in _LOGICAL else comp
        self.finish(out, f"fd.ops.{op}({a.var}, {c.var})", result, op)

    def _dims(self, dims, ndim: int) -> list[int]:
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            return list(range(ndim))
        if isinstance(dims, int):
            dims = [dims]
        return sorted({_norm_dim(int(d), ndim) for d in dims})

    def _reduction(self, name: str, overload: str, args: dict, out: TensorProxy) -> None:
        x = args["self"]
        if not isinstance(x, TensorProxy):
            raise NvFuserLoweringError(f"{name} of a non-tensor")
        xv = self.value(x)
        ndim = len(x.shape)
        dims = self._dims(args.get("dim"), ndim)
        keepdim = bool(args.get("keepdim") or False)
        if name in ("any", "all"):
            truth = self.cast(xv, "bool") if xv.dtype == "bool" else self.temp(
                f"{xv.var}_nz", f"fd.ops.ne({xv.var}, {self.scalar(0, xv.dtype).var})", xv.shape, "bool", "ne")
            if name == "all":
                truth = self.temp(f"{xv.var}_z", f"fd.ops.logical_not({truth.var})", xv.shape, "bool", "logical_not")
            count = self.cast(truth, "int64")
            if ndim == 0:
                total = count
            else:
                total = self.temp(f"{self.var_for(out.name)}_n",
                                  f"fd.ops.sum({count.var}, dims={dims}, keepdim={keepdim})", out.shape, "int64", "sum")
            zero = self.scalar(0, "int64")
            op = "gt" if name == "any" else "eq"
            self.finish(out, f"fd.ops.{op}({total.var}, {zero.var})", "bool", op)
            return
        if x.dtype == "bool" or x.dtype.startswith("int"):
            acc = "int64" if name in ("sum", "prod") else x.dtype
        else:
            acc = _opmath(out.dtype if name != "var" else x.dtype)
        if name in ("mean", "var") and acc not in _FLOATING:
            raise NvFuserLoweringError(f"{name} of integer tensors is not defined")
        src = self.cast(xv, acc)
        if ndim == 0 or not dims:
            self.bind_same(out, src)  # reducing a 0-d tensor is the identity
            return
        if name == "var":
            corr = args.get("correction")
            if overload in ("dim", "default"):
                corr = 1 if args.get("unbiased", True) else 0
            corr = 1 if corr is None else corr
            if float(corr) != int(corr):
                raise NvFuserLoweringError(f"var with a non-integer correction {corr!r}")
            self.finish(out, f"fd.ops.var({src.var}, dims={dims}, correction={int(corr)}, keepdim={keepdim})",
                        acc, "var")
            return
        op = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "mean": "sum"}[name]
        expr = f"fd.ops.{op}({src.var}, dims={dims}, keepdim={keepdim})"
        if name == "mean":
            n = 1
            for d in dims:
                n *= x.shape[d]
            total = self.temp(f"{self.var_for(out.name)}_sum", expr, out.shape, acc, "sum")
            count = self.scalar(n, acc)
            self.finish(out, f"fd.ops.div({total.var}, {count.var})", acc, "div")
            return
        self.finish(out, expr, acc, op)

    def _convert(self, args: dict, out: TensorProxy) -> None:
        x = args["self"]
        device = args.get("device")
        if device is not None and str(device) != x.device and not (str(device) == "cuda" and _is_cuda(x)):
            raise NvFuserLoweringError(f"copies from {x.device} to {device} are not lowered")
        self.bind_same(out, self.value(x))

    def _shape(self, name: str, overload: str, args: dict, out: TensorProxy) -> None:
        if name == "cat":
            tensors = list(args["tensors"])
            dim = _norm_dim(int(args.get("dim", 0)), len(out.shape))
            # ATen's cat skips 1-d empty tensors of any other shape (legacy behaviour); so do we.
            kept = [t for t in tensors if not (len(t.shape) == 1 and t.shape[0] == 0)] or tensors[:1]
            vals = [self.cast(self.value(t), out.dtype) for t in kept]
            names = ", ".join(v.var for v in vals)
            self.finish(out, f"fd.ops.cat([{names}], dim={dim})", out.dtype, "cat")
            return
        x = args["self"]
        if not isinstance(x, TensorProxy):
            raise NvFuserLoweringError(f"{name} of a non-tensor")
        v = self.value(x)
        nd = len(x.shape)
        if name in ("clone", "alias"):
            self.bind_same(out, v)
        elif name == "view":
            if overload != "default" and "size" not in args:
                raise NvFuserLoweringError(f"view.{overload} (a bitcast) is not lowered")
            if tuple(x.shape) == tuple(out.shape):
                self.bind_same(out, v)
            else:
                self.finish(out, f"fd.ops.reshape({v.var}, new_shape={list(out.shape)})", out.dtype, "reshape")
        elif name == "expand":
            v = self.cast(v, out.dtype)
            dims = list(range(len(out.shape) - nd, len(out.shape)))
            self.finish(out, f"fd.ops.broadcast_in_dim({v.var}, shape={list(out.shape)}, broadcast_dims={dims})",
                        out.dtype, "broadcast_in_dim")
        elif name == "permute":
            perm = [_norm_dim(int(d), nd) for d in args["dims"]]
            self.finish(out, f"fd.ops.permute({v.var}, dims={perm})", out.dtype, "permute")
        elif name == "squeeze":
            if overload == "default":
                dims = list(range(nd))
            else:  # squeeze.dim / squeeze.dims: only the listed dims (an empty list squeezes none)
                dim = args.get("dim")
                dims = sorted({_norm_dim(int(d), nd) for d in ([dim] if isinstance(dim, int) else dim)})
            dims = [d for d in dims if x.shape[d] == 1]
            if not dims:
                self.bind_same(out, v)
            else:
                self.finish(out, f"fd.ops.squeeze({v.var}, dims={dims})", out.dtype, "squeeze")
        elif name == "unsqueeze":
            d = _norm_dim(int(args["dim"]), nd + 1)
            keep = [i for i in range(nd + 1) if i != d]
            self.finish(out, f"fd.ops.broadcast_in_dim({v.var}, shape={list(out.shape)}, broadcast_dims={keep})",
                        out.dtype, "broadcast_in_dim")
        elif name in ("slice", "select"):
            d = _norm_dim(int(args.get("dim", 0)), nd)
            size = x.shape[d]
            if name == "select":
                i = int(args["index"])
                if not -size <= i < size:
                    raise NvFuserLoweringError(f"select index {i} out of range")
                start, end, step = i % size, i % size + 1, 1
            else:
                step = int(args.get("step") or 1)
                if step < 1:
                    raise NvFuserLoweringError("slice with a non-positive step")
                start, end = args.get("start"), args.get("end")
                start = 0 if start is None else int(start)
                end = size if end is None else int(end)
                start = min(max(start + size if start < 0 else start, 0), size)
                end = min(max(end + size if end < 0 else end, start), size)
            starts = [start if i == d else 0 for i in range(nd)]
            ends = [end if i == d else s for i, s in enumerate(x.shape)]
            steps = [step if i == d else 1 for i in range(nd)]
            expr = f"fd.ops.slice({v.var}, start_indices={starts}, end_indices={ends}, strides={steps})"
            if name == "slice":
                self.finish(out, expr, out.dtype, "slice")
            else:
                sl = self.temp(f"{self.var_for(out.name)}_sl", expr,
                               tuple(1 if i == d else s for i, s in enumerate(x.shape)), out.dtype, "slice")
                self.finish(out, f"fd.ops.squeeze({sl.var}, dims={[d]})", out.dtype, "squeeze")
        elif name == "constant_pad_nd":
            pad = [int(p) for p in args["pad"]]
            if any(p < 0 for p in pad):
                raise NvFuserLoweringError("negative padding is not lowered")
            value = self.scalar(args.get("value") or 0, out.dtype)
            self.finish(out, f"fd.ops.pad({v.var}, pad_widths={pad}, value={value.var})", out.dtype, "pad")
        else:
            raise NvFuserLoweringError(f"no nvFuser lowering for {name}")


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "bool": "b8"}


