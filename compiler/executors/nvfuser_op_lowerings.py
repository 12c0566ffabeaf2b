"""The nvFuser lowering of each prim family: elementwise ops (with ATen's broadcasting and type
promotion), reductions, dtype conversion and shape ops.

:class:`OpLowerings` is the part of the generator (:class:`.nvfuser_lowering._Generator`) that
emits one prim; the generator provides the names, values, casts, broadcasts and outputs it uses.
"""
from __future__ import annotations

from ..ir import TensorProxy
from .nvfuser_support import (_BOOL_RESULT_UNARY, _COMPARISON, _FLOATING, _LOGICAL, _ROUNDING, BINARY, DATATYPE,
                              UNARY, NvFuserLoweringError, _is_cuda)
from .nvfuser_values import _norm_dim, _opmath, _promoted


class OpLowerings:
    """Per-family prim lowerings of :class:`.nvfuser_lowering._Generator` (a mixin)."""

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
