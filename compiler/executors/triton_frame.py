"""A region whose reduction over dims apart reads a value computed in the same kernel, run in the
reduction's frame: every value of the reduced input's rank permuted so that the reduced dims come
last (BatchNorm's backward sums ``grad * (x - mean)`` over ``[0, 2, 3]``).

:func:`~.triton_region.reduced_last` reads a region *input* permuted; a value the kernel computes
lives in the kernel's iteration order and cannot be read so, so such a reduction used to get a kernel
of its own and its producer another (a round trip of the whole tensor through memory). Here the
whole region iterates in the permuted order instead: the region's inputs of that rank are read
through a ``permute`` (in place), each op on values of that rank computes their permuted twin (same
name, dims permuted), a reduction reduces the trailing dims, and an output is stored through its
permuted strides, so it lands where the original layout puts it.

Only what keeps the same meaning when permuted is rewritten: elementwise ops (a lower-rank operand
viewed to the rank first, as broadcasting aligns it), the reductions over exactly those dims, ``expand``, copies, and views between a lower rank and that
rank that only move size-1 dims; anything else (another reduction, a reshape of the full tensor)
returns None and the region is generated as before.
"""
from __future__ import annotations

from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from ..values import contiguous_strides
from .triton_index import out_strides
from .triton_region import bind, prim_name, reduce_dims, reduces_apart

_ELEMENTWISE = (set(ops.UNARY) | set(ops.LOGICAL_UNARY) | set(ops.BITWISE_UNARY) | set(ops.BINARY) | ops.REMAINDERS
                | set(ops.COMPARE) | set(ops.LOGICAL) | set(ops.BITWISE) | ops.TERNARY | {"pow", "convert_element_type"})
_COPIES = {"alias", "clone"}


class _NotInFrame(Exception):
    """The region has an op the permuted frame does not rewrite."""


def _non_ones(shape) -> list:
    return [s for s in shape if s != 1]


def permuted_frame(members: list[BoundSymbol], outputs: list[TensorProxy]) -> Optional[tuple[list, list, list]]:
    """Return ``(members, outputs, dims order)`` of the region in the frame of its reductions over
    dims apart (see the module doc), or None when it has none or an op the frame does not rewrite.
    Outputs keep their names (the launcher's buffers), with permuted shapes and strides."""
    reds = [b for b in members if prim_name(b) in ops.REDUCTIONS]
    apart = [b for b in reds if reduces_apart(b)]
    if not apart:
        return None
    x0 = apart[0].args[0]
    rank, dims = len(x0.shape), reduce_dims(apart[0], x0)
    if any(len(b.args[0].shape) != rank or reduce_dims(b, b.args[0]) != dims for b in reds):
        return None
    perm = [d for d in range(rank) if d not in dims] + dims
    try:
        return (*_Frame(members, rank, perm).rewrite(outputs), perm)
    except _NotInFrame:
        return None


class _Frame:
    def __init__(self, members: list[BoundSymbol], rank: int, perm: list[int]):
        self.members, self.rank, self.perm = members, rank, perm
        self.made = {p.name for b in members for p in b.flat_outputs()}
        self.twins: dict[str, TensorProxy] = {}
        self.lifted: dict[str, TensorProxy] = {}  # lower-rank operands viewed to the frame's rank
        self.out: list[BoundSymbol] = []

    def shape(self, shape) -> tuple:
        return tuple(shape[d] for d in self.perm)

    def of_rank(self, v) -> bool:
        return isinstance(v, TensorProxy) and len(v.shape) == self.rank

    def twin(self, p: TensorProxy) -> TensorProxy:
        """The permuted twin of computed value ``p``: same name, dims permuted, strides permuted
        (an output stored through them lands where ``p``'s layout puts it)."""
        st = out_strides(p)
        t = TensorProxy(p.name, self.shape(p.shape), p.dtype, p.device, tuple(st[d] for d in self.perm))
        self.twins[p.name] = t
        return t

    def read(self, v, consumer: BoundSymbol):
        """``v`` as the frame reads it: a value of the rank, permuted (a region input through a
        ``permute`` member, read in place); anything else as is."""
        if not self.of_rank(v):
            return v
        if v.name in self.twins:
            return self.twins[v.name]
        if v.name in self.made:
            raise _NotInFrame(f"{v.name} is read before it is computed")
        shape = self.shape(v.shape)
        strides = contiguous_strides(shape)
        t = TensorProxy(f"{v.name}_frame", shape, v.dtype, v.device, strides)
        self.out.append(BoundSymbol("prims.permute", (v, list(self.perm)), {}, t, aten="aten.permute.default",
                                    **_like(consumer)))
        self.twins[v.name] = t
        return t

    def operand(self, v, consumer: BoundSymbol):
        """An elementwise operand in the frame: a tensor of a lower rank (not 0-d) broadcasts against
        the trailing dims, so it is first viewed with leading size-1 dims to the rank (then
        permuted: a view again, when its other dims keep their order)."""
        if not isinstance(v, TensorProxy) or len(v.shape) in (0, self.rank):
            return self.read(v, consumer)
        lifted = self.lifted.get(v.name)
        if lifted is None:
            padded = (1,) * (self.rank - len(v.shape)) + tuple(v.shape)
            target = self.shape(padded)
            if _non_ones(target) != _non_ones(padded):
                raise _NotInFrame(f"{v.name} broadcasts with dims of other sizes in another order")
            lifted = TensorProxy(f"{v.name}_lifted", target, v.dtype, v.device, contiguous_strides(target))
            self.out.append(BoundSymbol("prims.view", (v, list(target)), {}, lifted, aten="aten.view.default",
                                        **_like(consumer)))
            self.lifted[v.name] = lifted
        return lifted

    def rewrite(self, outputs: list[TensorProxy]) -> tuple[list, list]:
        for b in self.members:
            self.out.append(self.member(b))
        new_outputs = []
        for p in outputs:
            if self.of_rank(p):
                if p.name not in self.made:
                    raise _NotInFrame("an input is returned as is")
                new_outputs.append(self.twins[p.name])
            else:
                new_outputs.append(p)
        return self.out, new_outputs

    def member(self, b: BoundSymbol) -> BoundSymbol:
        name, ins, outs = prim_name(b), b.flat_inputs(), b.flat_outputs()
        if not any(self.of_rank(p) for p in ins + outs):
            return b
        out = b.outputs
        if len(outs) != 1 or not isinstance(out, TensorProxy):
            raise _NotInFrame(f"{b.sym} has several outputs")
        like = _like(b)
        if name in ops.REDUCTIONS:
            a = bind(b)
            x = self.read(a.pop("self"), b)
            a["dim"] = list(range(self.rank - len(reduce_dims(b, b.args[0])), self.rank))  # the trailing ones
            return b.replace(args=(x,), kwargs=a, outputs=self.twin(out) if self.of_rank(out) else out)
        if name in _ELEMENTWISE or name in _COPIES:
            if not self.of_rank(out) or any(len(p.shape) > self.rank for p in ins):
                raise _NotInFrame(f"{b.sym} mixes ranks")
            args = tuple(self.operand(v, b) for v in b.args)
            kwargs = {k: self.operand(v, b) for k, v in b.kwargs.items()}
            return b.replace(args=args, kwargs=kwargs, outputs=self.twin(out))
        if name in ("unsqueeze", "squeeze", "view", "expand"):
            x = b.args[0]
            if not isinstance(x, TensorProxy):
                raise _NotInFrame(f"{b.sym} of a number")
            if name == "expand" and self.of_rank(x) and self.of_rank(out):
                return BoundSymbol("prims.expand", (self.read(x, b), list(self.shape(out.shape))), {}, self.twin(out),
                                   aten="aten.expand.default", **like)
            if self.of_rank(out) and not self.of_rank(x):  # lifted to the rank: where its size-1 dims go is free
                target = self.shape(out.shape)
                if _non_ones(target) != _non_ones(out.shape):
                    raise _NotInFrame(f"{b.sym} puts dims of other sizes in another order")
                return BoundSymbol("prims.view", (x, list(target)), {}, self.twin(out), aten="aten.view.default", **like)
            if self.of_rank(x) and not self.of_rank(out):  # dropped from the rank (squeeze of a kept sum)
                if _non_ones(self.shape(x.shape)) != _non_ones(x.shape):
                    raise _NotInFrame(f"{b.sym} reads dims of other sizes in another order")
                return BoundSymbol("prims.view", (self.read(x, b), list(out.shape)), {}, out, aten="aten.view.default",
                                   **like)
            if tuple(x.shape) == tuple(out.shape):  # a view to the same shape: a copy of the frame's value
                return BoundSymbol("prims.alias", (self.read(x, b),), {}, self.twin(out), aten="aten.alias.default",
                                   **like)
        raise _NotInFrame(f"{b.sym} is not rewritten into the frame")


def _like(b: BoundSymbol) -> dict:
    """The identity a symbol the frame inserts or rewrites takes from ``b``: uid (its lines name
    ``b``), origin, source line, sequence number."""
    return dict(uid=b.uid, origin=b.origin, source=b.source, seq_nr=b.seq_nr)
