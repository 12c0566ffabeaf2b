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
The tables of what is lowered are :mod:`.nvfuser_support`, the value and dtype rules
:mod:`.nvfuser_values`, the per-family lowerings :mod:`.nvfuser_op_lowerings` (all re-exported here).
"""
from __future__ import annotations

from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from ..prims import PRIMS
from .arguments import dropped_argument
from .nvfuser_op_lowerings import OpLowerings
from .nvfuser_support import (_BOOL_RESULT_UNARY, _COMPARISON, _FLOATING, _KIND_REASONS, _LOGICAL,  # noqa: F401
                              _LOW_PRECISION, _PRIM_REASONS, _ROUNDING, BINARY, DATATYPE, HONOURED, OTHER,
                              REDUCTIONS, SHAPE_OPS, SUPPORTED, UNARY, NvFuserLoweringError, bind_arguments,
                              _is_cuda, overload_of)
from .nvfuser_values import (_SHORT, _dt, _literal, _meta, _norm_dim, _opmath, _promoted,  # noqa: F401
                             _reserved, _Val)


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



class _Generator(OpLowerings):
    """Emits the body of one FusionDefinition function (the per-family lowerings are
    :class:`.nvfuser_op_lowerings.OpLowerings`')."""

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

