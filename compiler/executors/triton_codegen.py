"""Triton source generation for one fusion region.

A region runs as one kernel over one of two iteration domains:

- pointwise (no reductions): a 1-D grid over the ``T`` elements of its largest value; the tile is
  ``offs`` = element indices ``[BLOCK]``;
- reduction: every reduction in the region reduces the same ``N`` elements for each of ``M`` rows,
  either the trailing dims (``inner``: linear index ``L = m * N + n``, softmax / layer-norm shape)
  or the leading dims (``outer``: ``L = n * M + m``, bias-gradient shape); dims apart are made
  trailing by the plan (:mod:`.triton_plan`). The tile is ``[BM, BN]`` with ``BN >= N`` (a
  persistent reduction: a row is reduced in one go; GPU rows longer than a block are looped,
  :mod:`.triton_loop`). Reductions: sum, mean, var, amax/amin, any/all, argmax/argmin (the first
  index of the extreme, NaN first, as torch).

Every computed value has a *level*: ``full`` (one element per tile element: ``M*N`` or ``T``
elements), ``row`` (one per row: ``M`` elements, tile ``[BM, 1]``) or ``scalar`` (1 element). A
value of any other size cannot live in the kernel; such regions are refused with the reason.
Region inputs, and shape ops on them (view, expand, permute, squeeze, unsqueeze, clone), are not
materialized: they are *virtual* and read with index arithmetic from the input's recorded strides
wherever a consumer needs them, so broadcasts, permuted and offset views are read in place. Shape
ops on computed values are absorbed when they keep the element order (views, expand of a row or
scalar); a permute of a computed value is refused. Slices and concatenations of virtual values are
virtual too (a cat reads each operand under its own mask), and the indexing ops read memory at
loaded indices: ``gather``, ``aten.embedding`` and integer ``index`` from a virtual source,
``scatter`` of a scalar with one index per row as a ``where``. ``index_put`` and ``scatter_add``
write through atomics and only run as a phase of a multi-part kernel (:mod:`.triton_plan`), which
also composes several :class:`Part` bodies into one kernel. A loaded index out of range never
reaches memory: its read gives 0 and its write is skipped (eager raises; ``tl.device_assert``
says so with ``TRITON_DEBUG=1``). Integer division, remainder and fmod, and float floor division,
remainder and fmod, compute what eager computes, bit for bit (:meth:`Part.rounded_division`,
:meth:`Part.remainder`). Every name a part emits carries its prefix, so parts can share one kernel body.

Reductions over a row held whole are :mod:`.triton_reduce`, rows longer than a block :mod:`.triton_loop`.
The shape, concatenation and indexing ops are :mod:`.triton_reindex`; the argument binding, domain
helpers and value kinds are :mod:`.triton_region` (re-exported here).
"""
from __future__ import annotations

import math
from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from .triton_index import (Index, broadcast_index, linear, numel, offset, out_strides, row_compatible,  # noqa: F401
                           strides_of)
from .triton_region import (ATEN_OPS, FREE_OPS, Const, Tile, Unfusable, Virtual, bind, block_sizes,  # noqa: F401
                            prim_name, reduce_dims, reduction_domain, slice_params)
from .triton_arith import ArithmeticOps
from .triton_loop import LoopedReductions
from .triton_reduce import PersistentReductions
from .triton_reindex import ReindexOps


# The source text ops.literal writes for a number: 1.5, -3e+38, 7, float('-inf'), float('nan').


class Part(ReindexOps, PersistentReductions, LoopedReductions, ArithmeticOps):
    """Generates the body of one kernel part over one iteration domain; raises Unfusable on anything
    it cannot express. ``prefix`` starts every name it emits (parameters ``{prefix}in{i}`` /
    ``{prefix}out{k}``, tile variables, indices), ``read_strides`` gives the layout of values that
    earlier parts of the same kernel wrote (by name), and ``index_put`` allows that op (the part then
    scatters into the parameter ``{prefix}dst``)."""

    def __init__(self, members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str,
                 prefix: str = "", read_strides: Optional[dict] = None, index_put: bool = False):
        self.members, self.outputs, self.device_kind = members, outputs, device_kind
        self.p = prefix
        self.read_strides = read_strides or {}
        self.allow_index_put = index_put
        self.lines: list[str] = []
        # The member symbol each line of ``lines`` was emitted for (its uid; None: set-up lines),
        # so a compiled instruction can be traced back to the op it came from.
        self.line_uids: list = []
        self.current_uid = None
        self.indent = ""  # inside a looped reduction's chunk loop: one more level
        self.env: dict[str, object] = {}
        self.cache: dict = {}
        self.count = 0
        self.inputs: list[TensorProxy] = []
        self._domain()
        self.sizes = block_sizes(self.kind, self.M, self.N, self.T, device_kind, self.layout)
        # Rows longer than one block (GPU plans): walked in chunks (triton_loop).
        self.looped = bool(self.sizes.get("looped"))
        self._acc = None

    # ------------------------------------------------------------------ domain and tiles
    def _domain(self) -> None:
        reds = [b for b in self.members if prim_name(b) in ops.REDUCTIONS]
        puts = [b for b in self.members if prim_name(b) in ops.PUTS]
        if puts and not self.allow_index_put:
            raise Unfusable(f"{prim_name(puts[0])} runs only as a phase of its own in a single-program kernel")
        if not reds:
            self.kind = "pointwise"
            computed = [p for b in self.members if prim_name(b) not in FREE_OPS for p in b.flat_outputs()]
            if puts:  # the part walks the values scattered (scatter_add: as many as its index has)
                put = bind(puts[0])
                self.T = numel((put["values"] if "values" in put else put["index"]).shape)
            else:  # computed values set the domain; shape ops of inputs follow it
                self.T = max((numel(p.shape) for p in computed or self.outputs
                              or [p for b in self.members for p in b.flat_outputs()]), default=0)
            self.M, self.N, self.layout = self.T, 1, "inner"
            if self.T == 0:
                raise Unfusable("the region computes empty tensors")
            return
        self.kind = "reduction"
        self.M, self.N, self.layout = reduction_domain(reds[0])
        self.T = self.M * self.N
        for b in reds[1:]:
            M, N, layout = reduction_domain(b)
            if (M, N) != (self.M, self.N) or (layout != self.layout and min(M, N) > 1):
                raise Unfusable(f"{b.uid} reduces {N} elements x {M} rows ({layout}) but the kernel "
                                f"reduces {self.N} x {self.M} ({self.layout})")
        if self.M * self.N == 0:
            raise Unfusable("the region reduces an empty tensor")
        limit = None if self.device_kind == "cuda" else 65536  # GPU rows longer than a block are looped
        if limit is not None and self.N > limit:
            raise Unfusable(f"a reduction over {self.N} elements exceeds the persistent-reduction limit {limit}")

    def level(self, n: int) -> str:
        if self.kind == "pointwise":
            if n == self.T:
                return "full"
        else:
            if n == self.M * self.N:
                return "full"
            if n == self.M:
                return "row"
        if n == 1:
            return "scalar"
        size = self.T if self.kind == "pointwise" else f"{self.M} rows x {self.N}"
        raise Unfusable(f"a value of {n} elements does not fit the kernel's iteration space ({size})")

    def index(self, level: str) -> Index:
        var = {"full": self.p + ("offs" if self.kind == "pointwise" else "L"), "row": self.p + "m", "scalar": "0"}[level]
        return ("lin", var)

    def mask(self, level: str) -> Optional[str]:
        return {"full": self.p + "mask", "row": self.p + "mask_m", "scalar": None}[level]

    def tile_shape(self, phys: str) -> str:
        if self.kind == "pointwise":
            return f"[{self.sizes['BLOCK']}]"
        return {"full": f"[{self.sizes['BM']}, {self.sizes['BN']}]", "row": f"[{self.sizes['BM']}, 1]"}[phys]

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{self.p}{prefix}{self.count}"

    def emit(self, expr: str, prefix: str = "v") -> str:
        var = self.fresh(prefix)
        self.line(f"    {var} = {expr}")
        return var

    def line(self, text: str) -> None:
        """Append one body line, tagged with the member symbol being generated."""
        self.lines.append(self.indent + text)
        self.line_uids.append(self.current_uid)

    def head(self, pid: str) -> list[str]:
        """Return the lines that set up this part's indices and masks for program ``pid``."""
        p, sizes = self.p, self.sizes
        lines = [f"    {p}pid = {pid}"]
        if self.kind == "pointwise":
            lines += [f"    {p}offs = {p}pid * {sizes['BLOCK']} + tl.arange(0, {sizes['BLOCK']})",
                      f"    {p}mask = {p}offs < {self.T}"]
        elif self.looped:  # the chunk loops set n, mask and L (triton_loop)
            lines += [f"    {p}m = {p}pid * {sizes['BM']} + tl.arange(0, {sizes['BM']})[:, None]",
                      f"    {p}mask_m = {p}m < {self.M}"]
        else:
            L = f"{p}m * {self.N} + {p}n" if self.layout == "inner" else f"{p}n * {self.M} + {p}m"
            bm, bn = sizes["BM"], sizes["BN"]
            lines += [f"    {p}m = {p}pid * {bm} + tl.arange(0, {bm})[:, None]", f"    {p}n = tl.arange(0, {bn})[None, :]",
                      f"    {p}mask_m = {p}m < {self.M}", f"    {p}mask = {p}mask_m & ({p}n < {self.N})",
                      f"    {p}L = {L}"]
        return lines

    def describe(self) -> str:
        """Return the iteration domain in words."""
        if self.kind == "reduction":
            how = f", looped in chunks of {self.sizes['BN']}" if self.looped else ""
            return f"reduction, {self.M} rows x {self.N} ({self.layout}{how})"
        return f"pointwise, {self.T} elements"

    # ------------------------------------------------------------------ reading values
    def value(self, x, level: str, out_shape) -> tuple[str, str]:
        """Return (expression, dtype) of operand ``x`` read by an op of ``out_shape`` at ``level``."""
        if not isinstance(x, TensorProxy):
            return x, "number"
        v = self.lookup(x)
        if isinstance(v, Const):
            return ops.literal(v.value, v.dtype), v.dtype
        if isinstance(v, Virtual):
            return v.read(broadcast_index(self.index(level), x.shape, out_shape), level, None), v.dtype
        if v.level == level or v.level == "scalar":
            return v.var, v.dtype
        if v.level == "row" and level == "full" and row_compatible(x.shape, out_shape, self.M, self.layout):
            return v.var, v.dtype
        raise Unfusable(f"{x.name} ({v.level} value {list(x.shape)}) cannot be read at the {level} level "
                        f"of a {list(out_shape)} result")

    def lookup(self, x: TensorProxy):
        v = self.env.get(x.name)
        if v is None and self.looped and any(x.name == p.name for b in self.members for p in b.flat_outputs()):
            raise Unfusable(f"{x.name} is computed chunk by chunk in a looped reduction and read outside the loop")
        return self._input(x) if v is None else v

    def _input(self, p: TensorProxy) -> Virtual:
        arg = f"{self.p}in{len(self.inputs)}"
        self.inputs.append(p)
        strides = self.read_strides.get(p.name) or strides_of(p)

        def read(idx, level, extra, s=p.shape, st=strides):
            return self.load(arg, offset(idx, s, st), level, extra)
        v = Virtual(p.shape, p.dtype, read)
        self.env[p.name] = v
        return v

    def load(self, arg: str, off: str, level: str, extra: Optional[str] = None) -> str:
        key = (arg, off, level, extra)
        if key not in self.cache:
            masks = [m for m in (self.mask(level), extra) if m]
            if off == "0":  # one element, the same for the whole tile (it exists: no empty tensors)
                self.cache[key] = self.emit(f"tl.load({arg} + {off})", "x")
            elif not masks:
                self.cache[key] = self.emit(f"tl.load({arg} + ({off}))", "x")
            else:
                self.cache[key] = self.emit(f"tl.load({arg} + ({off}), mask={' & '.join(masks)}, other=0)", "x")
        return self.cache[key]

    def cast(self, expr: str, src: str, dst: str) -> str:
        if src == "number":
            return ops.literal(expr, dst)
        m = ops.LITERAL.fullmatch(expr) if src != dst else None
        if m:  # a constant of a half type: a Python number has no .to(); write it in the target dtype
            text = m.group(1) or m.group(2)
            return ops.literal(int(text) if text.lstrip("-").isdigit() else float(text), dst)
        if src == dst:
            return expr
        if dst == "bool":
            return f"({expr} != 0)"
        return f"{expr}.to({ops.TL_DTYPE[dst]})"

    def virtual(self, x: TensorProxy, what: str) -> Virtual:
        """Return ``x`` as a virtual value (read from memory at any index); raise Unfusable."""
        v = self.lookup(x)
        if not isinstance(v, Virtual):
            raise Unfusable(f"{what} reads {x.name}, a value computed in the same kernel part, at other indices")
        return v

    # ------------------------------------------------------------------ ops
    def run(self) -> None:
        if self.looped:  # reductions chunk by chunk, then the stores (store() is then a no-op)
            self._run_looped()
            self._store_looped(self.outputs)
            return
        for b in self.members:
            self.current_uid = b.uid
            self.op(b)
        self.current_uid = None

    def op(self, b: BoundSymbol) -> None:
        name = prim_name(b)
        out = b.outputs
        if not isinstance(out, TensorProxy):
            raise Unfusable(f"{b.sym} has several outputs")
        if out.dtype not in ops.TL_DTYPE:
            raise Unfusable(f"dtype {out.dtype} is not supported")
        if name in ops.SHAPE:
            return self.shape_op(b, name, out)
        if name in ops.FACTORY:
            a = bind(b)
            self.env[out.name] = Const(a.get("fill_value", a.get("s")), out.dtype)
            return
        if name == "cat":
            return self.cat(b, out)
        if name == "constant_pad_nd":
            return self.constant_pad(b, out)
        if name == "arange":
            a = bind(b)
            start, step = (a.get("start") or 0, a.get("step") or 1) if "start" in a else (0, 1)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, step)):
                raise Unfusable(f"arange with non-numeric start/step {start!r}, {step!r}")
            start, step = repr(start), repr(step)  # numbers only ever enter the source through repr
            T = ops.TL_DTYPE[out.dtype]

            def read(idx, level, extra, shape=out.shape):
                lin = linear(idx, shape)
                return start if lin == "0" else f"(({lin}).to({T}) * {step} + {start})"
            self.env[out.name] = Virtual(out.shape, out.dtype, read)
            return
        if name == "index_put":
            return self.index_put(b)
        if name == "scatter_add":
            return self.scatter_add(b)
        level = self.level(numel(out.shape))
        if name in ops.REDUCTIONS:
            return self.reduction(b, name, out, level)
        reads = {"gather": self.gather, "embedding": self.embedding, "scatter": self.scatter, "index": self.advanced_index}
        if name in reads:  # a fixed table, never a method looked up by the op's name
            self.env[out.name] = Tile(self.emit(reads[name](b, out, level)), level, level, out.dtype)
            return
        a = bind(b)
        C = ops.compute_dtype(out.dtype)

        def arg(x, dtype=C):
            e, dt = self.value(x, level, out.shape)
            return self.cast(e, dt, dtype)

        if name in ops.UNARY:
            x = a["self"]
            if name in ("floor", "ceil", "trunc", "round") and x.dtype not in ops.FLOATS:
                expr = arg(x)
            else:
                src = ops.compute_dtype(ops.promoted([x])) if name == "isnan" else C
                expr = ops.UNARY[name](arg(x, src))
        elif name in ops.LOGICAL_UNARY:
            expr = ops.LOGICAL_UNARY[name](arg(a["self"], a["self"].dtype))
        elif name in ops.BITWISE_UNARY:
            x = a["self"]
            expr = f"({arg(x, 'bool')} == 0)" if x.dtype == "bool" else ops.BITWISE_UNARY[name](arg(x))
        elif name == "div" and a.get("rounding_mode") is not None:
            x, y = self.tensor_operands(arg(a["self"]), arg(a["other"]))
            expr = self.rounded_division(x, y, a["rounding_mode"], C)
        elif name in ops.REMAINDERS:
            x, y = self.tensor_operands(arg(a["self"]), arg(a["other"]))
            expr = self.remainder(name, x, y, C)
        elif name in ops.BINARY:
            x, y = arg(a["self"]), arg(a["other"])
            if a.get("alpha") not in (None, 1):
                y = f"({y} * {ops.literal(a['alpha'], C)})"
            expr = ops.BINARY[name](x, y)
        elif name in ops.COMPARE or name in ops.BITWISE:
            src = ops.compute_dtype(ops.promoted([a["self"], a["other"]]))
            sym = ops.COMPARE.get(name) or ops.BITWISE[name]
            expr = f"({arg(a['self'], src)} {sym} {arg(a['other'], src)})"
        elif name in ops.LOGICAL:
            expr = f"({arg(a['self'], 'bool')} {ops.LOGICAL[name]} {arg(a['other'], 'bool')})"
        elif name == "where":
            expr = f"tl.where({arg(a['condition'], 'bool')}, {arg(a['self'])}, {arg(a['other'])})"
        elif name == "clamp":
            expr = arg(a["self"])
            if a.get("min") is not None:
                lo = self.emit(arg(a["min"]))
                expr = f"tl.where({expr} < {lo}, {lo}, {expr})"
            if a.get("max") is not None:
                expr = self.emit(expr)
                hi = self.emit(arg(a["max"]))
                expr = f"tl.where({expr} > {hi}, {hi}, {expr})"
        elif name == "pow":
            base, exponent = a["self"], a["exponent"]
            if isinstance(exponent, (int, float)) and isinstance(base, TensorProxy):
                expr = ops.pow_expr(self.emit(arg(base)), float(exponent), C)
            elif isinstance(base, (int, float)) and base > 0:
                expr = f"tl.exp({arg(exponent)} * {math.log(base)!r})"
            else:
                raise Unfusable("pow with a tensor exponent and tensor (or non-positive) base")
        elif name == "convert_element_type":
            x = a["self"]
            e, dt = self.value(x, level, out.shape)
            self.env[out.name] = Tile(self.emit(self.cast(e, dt, out.dtype)), level, level, out.dtype)
            return
        else:
            raise Unfusable(f"{b.sym} is not supported by the triton executor")
        dtype = "bool" if name in ops.COMPARE or name in ops.LOGICAL or name in ("isnan", "logical_not") else C
        var = self.emit(self.cast(expr, dtype, out.dtype) if dtype != out.dtype else expr)
        self.env[out.name] = Tile(var, level, level, out.dtype)

    # ------------------------------------------------------------------ outputs
    def store(self, k: int, p: TensorProxy) -> None:
        """Store output ``k`` (``p``) of the part (a looped part stored its outputs in run())."""
        if not self.looped:
            self._store_one(k, p)

    def _store_one(self, k: int, p: TensorProxy) -> None:
        self.current_uid = next((b.uid for b in self.members if any(q.name == p.name for q in b.flat_outputs())), None)
        level = self.level(numel(p.shape))
        v = self.env.get(p.name)
        if v is None:
            raise Unfusable(f"output {p.name} is not computed by the region")
        if isinstance(v, Virtual):
            var = v.read(self.index(level), level, None)
        elif isinstance(v, Const):
            if level == "scalar":
                var = f"tl.full([], {ops.literal(v.value, v.dtype)}, {ops.TL_DTYPE[v.dtype]})"
            else:
                var = f"tl.full({self.tile_shape(level)}, {ops.literal(v.value, v.dtype)}, {ops.TL_DTYPE[v.dtype]})"
        else:
            var = v.var
            if v.phys != level and level != "scalar":
                var = f"tl.broadcast_to({var}, {self.tile_shape(level)})"
        strides = out_strides(p)
        off = offset(self.index(level), p.shape, strides)
        if level == "scalar":
            self.line(f"    tl.store({self.p}out{k} + {off}, {var}, mask={self.p}pid == 0)")
        else:
            self.line(f"    tl.store({self.p}out{k} + ({off}), {var}, mask={self.mask(level)})")
        self.current_uid = None

