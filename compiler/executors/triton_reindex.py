"""The Triton ops that read values at other indices: shape ops (views read in place, permutes and
slices of memory, expands of rows), concatenation, and the indexing ops (gather, embedding, scatter,
index_put).

:class:`ReindexOps` is the part of :class:`.triton_codegen.Part` that emits them; the part provides
the domain, the value lookups, loads, casts and names they use.
"""
from __future__ import annotations

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from .triton_index import as_dims, broadcast_index, linear, numel, offset, out_strides, row_compatible
from .triton_region import (Const, Tile, Unfusable, Virtual, advanced_index_block, bind, pad_leads,
                            select_params, slice_params)


class ReindexOps:
    """Shape, concatenation and indexing ops of :class:`.triton_codegen.Part` (a mixin)."""

    def shape_op(self, b: BoundSymbol, name: str, out: TensorProxy) -> None:
        src = b.args[0]
        v = self.lookup(src)
        if isinstance(v, Const):
            self.env[out.name] = v
            return
        if isinstance(v, Virtual):
            tr = self._view_index(name, b, src, out)
            self.env[out.name] = Virtual(out.shape, v.dtype,
                                         lambda idx, level, extra, tr=tr, r=v.read: r(tr(idx), level, extra))
            return
        n_in, n_out = numel(src.shape), numel(out.shape)
        if name == "permute":
            perm = list(bind(b)["dims"])
            kept = [d % len(src.shape) for d in perm if src.shape[d % len(src.shape)] != 1]
            if kept != sorted(kept):
                raise Unfusable(f"permute of the computed value {src.name} changes element order")
        if name in ("slice", "select") and n_in != n_out:
            raise Unfusable(f"{name} of the computed value {src.name}")
        if n_in == n_out:
            self.env[out.name] = Tile(v.var, v.level, v.phys, v.dtype)
            return
        # expand of a row or scalar value
        level = self.level(n_out)
        if v.level == "scalar" or (v.level == "row" and level == "full"
                                   and row_compatible(src.shape, out.shape, self.M, self.layout)):
            self.env[out.name] = Tile(v.var, level, v.phys, v.dtype)
            return
        raise Unfusable(f"expand of {src.name} {list(src.shape)} to {list(out.shape)} does not follow the kernel's rows")

    def _view_index(self, name: str, b: BoundSymbol, src: TensorProxy, out: TensorProxy):
        """Return the map from an index into ``out`` to the index into ``src`` of shape op ``b``."""
        if name == "permute":
            perm = [d % len(src.shape) for d in bind(b)["dims"]]

            def locate(idx):
                dims = as_dims(idx, out.shape)
                u = ["0"] * len(src.shape)
                for i, d in enumerate(perm):
                    u[d] = dims[i]
                return ("dims", u)
            return locate
        if name == "slice":
            dim, start, step = slice_params(b, src)

            def locate(idx):
                dims = as_dims(idx, out.shape)
                e = dims[dim] if step == 1 else f"({dims[dim]}) * {step}"
                dims[dim] = e if start == 0 else f"({start} + {e})"
                return ("dims", dims)
            return locate
        if name == "select":
            dim, index = select_params(b, src)

            def locate(idx):
                dims = as_dims(idx, out.shape)
                dims.insert(dim, str(index))
                return ("dims", dims)
            return locate
        if name == "expand" and numel(src.shape) != numel(out.shape):
            return lambda idx: broadcast_index(idx, src.shape, out.shape)
        if tuple(src.shape) == tuple(out.shape):
            return lambda idx: idx
        return lambda idx: ("lin", linear(idx, out.shape)) if idx[0] == "dims" else idx

    def cat(self, b: BoundSymbol, out: TensorProxy) -> None:
        a = bind(b)
        parts = [x for x in a["tensors"] if numel(x.shape) > 0]
        dim = a.get("dim", 0) % len(out.shape)
        srcs, start = [], 0
        for x in parts:
            srcs.append((start, start + x.shape[dim], self.virtual(x, "cat")))
            start += x.shape[dim]

        def read(idx, level, extra):
            dims = as_dims(idx, out.shape)
            d = dims[dim]
            vals = []
            for lo, hi, v in srcs:
                cond = f"(({d}) >= {lo}) & (({d}) < {hi})"
                sub = list(dims)
                sub[dim] = d if lo == 0 else f"(({d}) - {lo})"
                vals.append((cond, v.read(("dims", sub), level, f"({extra}) & {cond}" if extra else cond)))
            expr = vals[-1][1]
            for cond, val in reversed(vals[:-1]):
                expr = f"tl.where({cond}, {val}, {expr})"
            return self.emit(expr)
        self.env[out.name] = Virtual(out.shape, out.dtype, read)

    def constant_pad(self, b: BoundSymbol, out: TensorProxy) -> None:
        """``constant_pad_nd``: each element read from the input where its index, shifted by the
        dim's leading pad, falls inside it (a masked load), the pad value elsewhere."""
        a = bind(b)
        x = a["self"]
        src = self.virtual(x, "constant_pad_nd")
        lead = pad_leads(a["pad"], x)
        value = ops.literal(a.get("value") or 0, ops.compute_dtype(out.dtype))

        def read(idx, level, extra):
            dims = as_dims(idx, out.shape)
            conds, at = [], list(dims)
            for d, lo in lead.items():
                at[d] = f"(({dims[d]}) - {lo})" if lo else dims[d]
                conds.append(f"(({at[d]}) >= 0) & (({at[d]}) < {x.shape[d]})")
            inside = " & ".join(conds)
            val = src.read(("dims", at), level, f"({extra}) & {inside}" if extra else inside)
            return self.emit(f"tl.where({inside}, {val}, {value})")
        self.env[out.name] = Virtual(out.shape, out.dtype, read)

    def in_bounds(self, indices, level: str) -> str:
        """Emit and return the name of the ``level`` mask and ``0 <= i < size`` for every ``(i, size)``
        of ``indices`` (loaded index values): the mask that keeps a read or a write at an index out
        of range inside the tensor (a read gives 0, a write is skipped), where eager raises; with
        ``TRITON_DEBUG=1`` the kernel asserts it, like eager's device-side assert."""
        cond = self.emit(" & ".join(f"(({i}) >= 0) & (({i}) < {size})" for i, size in indices))
        mask = self.mask(level)
        if not mask:
            self.line(f"    tl.device_assert({cond}, 'index out of bounds')")
            return cond
        # where(), not &: the interpreter makes an int32 of a tile & a scalar's bool (one index)
        self.line(f"    tl.device_assert(tl.where({mask}, {cond}, True), 'index out of bounds')")
        return self.emit(f"tl.where({cond}, {mask}, False)")

    def gather(self, b: BoundSymbol, out: TensorProxy, level: str) -> str:
        a = bind(b)
        x, index = a["self"], a["index"]
        dim = a["dim"] % len(x.shape)
        src = self.virtual(x, "gather")
        e, dt = self.value(index, level, out.shape)
        dims = as_dims(self.index(level), out.shape)
        dims[dim] = self.emit(self.cast(e, dt, "int64" if dt == "int64" else "int32"))
        return src.read(("dims", dims), level, self.in_bounds([(dims[dim], x.shape[dim])], level))

    def embedding(self, b: BoundSymbol, out: TensorProxy, level: str) -> str:
        a = bind(b)
        weight, indices = a["weight"], a["indices"]
        dims = as_dims(self.index(level), out.shape)
        idx = self.virtual(indices, "embedding").read(("dims", dims[:-1]), level, None)
        ok = self.in_bounds([(idx, weight.shape[0])], level)
        return self.virtual(weight, "embedding").read(("dims", [idx, dims[-1]]), level, ok)

    def advanced_index(self, b: BoundSymbol, out: TensorProxy, level: str) -> str:
        """``index``: ``x[..., i, j, ...]`` with integer index tensors on adjacent dims (see
        :func:`advanced_index_block`): the kept dims are read in place, each index tensor at the
        broadcast index of its block, a negative index counted from the end of its dim."""
        a = bind(b)
        x = a["self"]
        first, tensors, rank = advanced_index_block(a["indices"], x, out)
        dims = as_dims(self.index(level), out.shape)
        block = dims[first:first + rank]
        src = []
        for t, size in zip(tensors, x.shape[first:]):
            off = rank - len(t.shape)
            at = ["0" if n == 1 else block[off + d] for d, n in enumerate(t.shape)]
            i = self.virtual(t, "index").read(("dims", at), level, None)
            src.append(self.emit(f"tl.where({i} < 0, {i} + {size}, {i})"))
        read = dims[:first] + src + dims[first + rank:]
        ok = self.in_bounds(list(zip(src, x.shape[first:])), level)
        return self.virtual(x, "index").read(("dims", read), level, ok)

    def scatter(self, b: BoundSymbol, out: TensorProxy, level: str) -> str:
        a = bind(b)
        base, index, val = a["self"], a["index"], a["value"]
        dim = a["dim"] % len(out.shape)
        C = out.dtype
        e, dt = self.value(index, level, out.shape)
        selfv, sdt = self.value(base, level, out.shape)
        dims = as_dims(self.index(level), out.shape)
        return f"tl.where(({dims[dim]}) == {e}, {ops.literal(val, C)}, {self.cast(selfv, sdt, C)})"

    def scatter_add(self, b: BoundSymbol) -> None:
        """Emit ``out[..., index[p], ...] += src[p]`` (``index[p]`` at dim ``dim``) for every position
        ``p`` of ``index`` by atomic adds into the output (a copy of ``self`` the phase before);
        ``src`` is read at ``p`` too (it may be larger than ``index``), both in place."""
        a = bind(b)
        out, index, src = b.outputs, a["index"], a["src"]
        dim = a["dim"] % max(len(out.shape), 1)
        dims = as_dims(self.index("full"), index.shape)
        idx = self.virtual(index, "scatter_add").read(("dims", dims), "full", None)
        idx = self.emit(f"tl.where({idx} < 0, {idx} + {out.shape[dim] if out.shape else 1}, {idx})")
        e = self.virtual(src, "scatter_add").read(("dims", dims), "full", None)
        target = dims[:dim] + [idx] + dims[dim + 1:]
        off = offset(("dims", target), out.shape, out_strides(out))
        ok = self.in_bounds([(idx, out.shape[dim] if out.shape else 1)], "full")
        self.line(f"    tl.atomic_add({self.p}dst + ({off}), {self.cast(e, src.dtype, out.dtype)}, mask={ok})")

    def index_put(self, b: BoundSymbol) -> None:
        """Emit ``out[..., i[p], j[p], ...] = values[p]`` (``+=`` through atomic adds with
        ``accumulate``) for every position ``p`` of ``values``: integer index tensors on adjacent
        dims, broadcast together (:func:`advanced_index_block`; ``None`` entries before them take
        whole dims, as interpolate's backward writes), a negative index counted from the end."""
        a = bind(b)
        out, values, accumulate = b.outputs, a["values"], bool(a.get("accumulate"))
        first, tensors, rank = advanced_index_block(a["indices"], out, values)
        dims = as_dims(self.index("full"), values.shape)
        block = dims[first:first + rank]
        target = []
        for t, size in zip(tensors, out.shape[first:]):
            off = rank - len(t.shape)
            at = ["0" if n == 1 else block[off + d] for d, n in enumerate(t.shape)]
            i = self.virtual(t, "index_put").read(("dims", at), "full", None)
            target.append(self.emit(f"tl.where({i} < 0, {i} + {size}, {i})"))
        write = dims[:first] + target + dims[first + rank:]
        e, dt = self.value(values, "full", values.shape)
        off = offset(("dims", write), out.shape, out_strides(out))
        ok = self.in_bounds(list(zip(target, out.shape[first:])), "full")
        fn = "tl.atomic_add" if accumulate else "tl.store"
        self.line(f"    {fn}({self.p}dst + ({off}), {self.cast(e, dt, out.dtype)}, mask={ok})")
