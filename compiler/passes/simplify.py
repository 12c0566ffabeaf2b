"""Pass ``simplify``: removes symbols that hand back their input, or a copy nobody could tell apart.

Decompositions and AOTAutograd leave such symbols behind: ``addmm`` becomes ``mm`` plus ``mul(bias,
1)``; views and conversions to the shape or dtype a value already has appear; the backward of a
linear layer transposes a weight gradient twice (``t(t(g))``); saved tensors come back through
``detach``; and ``dropout(p=0)`` becomes a ``clone``. Each would otherwise cost a kernel launch or
a host call per step. A symbol ``y = op(x, ...)`` is an identity when ``y`` has exactly ``x``'s
shape, dtype and device, where both strides are recorded the same strides too, and it is one of:

- ``mul(x, 1)``, ``mul(1, x)``, ``div(x, 1)``, ``sub(x, 0)`` (bitwise exact, NaN and -0.0 included;
  ``add(x, 0)`` is not: it turns -0.0 into +0.0, so it stays),
- ``convert_element_type(x, dtype of x)``, ``view`` / ``expand`` to ``x``'s own shape, the identity
  ``permute``, ``detach`` and ``alias`` (the trace is functional, so they only rename),
- a transpose or permute of a value that is itself a transpose or permute, the two cancelling
  (``x`` is then the value before the first),
- ``clone(x)`` keeping ``x``'s layout, when nothing but the clone reads ``x`` or any value sharing
  its storage: then nobody can observe that the copy was not made (this is what eager does for
  ``dropout(p=0)``).

Removing ``y``: later readers of ``y`` read ``x`` instead. When ``y`` is a value the trace returns
(its name is part of the interface), ``y``'s name moves instead onto the symbol that made ``x``,
provided that symbol is in this trace and nothing else reads ``x``; otherwise ``y`` is kept. Where
``op`` makes a new tensor (``mul(x, 1)``, a clone, a conversion), removing it must not make two
values share storage that did not before: if a view of ``y`` reaches the trace's outputs, or ``y``
is returned, ``x``'s storage must be visible nowhere else (``x`` made here, read only by ``op``,
or a view read once of such a value). This applies at the top level; inside the ``subsymbols`` of
decomposed symbols, whose outputs their executor always makes fresh, readers are simply rewired.
Everything else keeps its uid, names and position, so the diff of this pass shows exactly what
went; values left unread are dropped by ``dce``, which runs next.
"""
from __future__ import annotations

import functools
from typing import Optional

from ..ir import BoundSymbol, Trace, TensorProxy, map_structure

NAME = "simplify"
# ``_to_copy`` keywords that cannot change anything but dtype / device (checked on the proxies).
_PLAIN_COPY_KWARGS = frozenset({"dtype", "device", "layout", "pin_memory", "non_blocking"})
# Symbols that return an alias of their (first) input, top level or prim.
_ALIASING_NAMES = frozenset({"aten.detach.default", "aten.alias.default", "prims.alias"})
_TRANSPOSES = frozenset({"aten.t.default", "aten.transpose.int", "aten.permute.default", "prims.permute"})
# Identities that return a view of their input; the other identities (``mul(x, 1)`` ...) make a new tensor.
_ALIAS_IDENTITIES = _ALIASING_NAMES | {"prims.view", "prims.expand", "prims.permute"}


def _is_number(v, value) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == value


def _same_value(x: TensorProxy, out: TensorProxy) -> bool:
    """True when ``out`` has ``x``'s shape, dtype, device and (where both are recorded) strides."""
    if tuple(x.shape) != tuple(out.shape) or x.dtype != out.dtype or x.device != out.device:
        return False
    # Same values in another layout are not the same to kernels that index by recorded strides.
    return x.strides is None or out.strides is None or tuple(x.strides) == tuple(out.strides)


def identity_source(b: BoundSymbol) -> Optional[TensorProxy]:
    """Return the input ``b`` returns unchanged (None when ``b`` is not such an identity; clones
    and transposes of transposes need context, see :func:`simplify`)."""
    out = b.outputs
    if not isinstance(out, TensorProxy) or not b.args:
        return None
    x = None
    if b.sym in _ALIASING_NAMES:
        x = b.args[0] if isinstance(b.args[0], TensorProxy) and not b.kwargs else None
        return x if x is not None and _same_value(x, out) else None
    if not b.sym.startswith("prims."):
        return None
    name = b.sym.removeprefix("prims.")
    if name in ("mul", "div", "sub") and len(b.args) == 2 and not b.kwargs:
        a0, a1 = b.args
        if name == "mul" and isinstance(a1, TensorProxy) and _is_number(a0, 1):
            x = a1
        elif isinstance(a0, TensorProxy) and _is_number(a1, 1 if name in ("mul", "div") else 0):
            x = a0
    elif name == "convert_element_type" and set(b.kwargs) <= _PLAIN_COPY_KWARGS and len(b.args) == 1:
        x = b.args[0] if isinstance(b.args[0], TensorProxy) else None
    elif name in ("view", "expand") and len(b.args) == 2 and not b.kwargs:
        x = b.args[0] if isinstance(b.args[0], TensorProxy) and list(b.args[1]) == list(out.shape) else None
    elif name == "permute" and len(b.args) == 2 and isinstance(b.args[0], TensorProxy):
        dims = [d % max(len(b.args[0].shape), 1) for d in b.args[1]]
        x = b.args[0] if dims == list(range(len(dims))) else None
    if x is None or not _same_value(x, out):
        return None
    return x


def transpose_perm(b: BoundSymbol) -> Optional[list[int]]:
    """Return the dimension order ``b`` gives its input when it is a transpose or permute, else None."""
    if b.sym not in _TRANSPOSES or not b.args or not isinstance(b.args[0], TensorProxy) or b.kwargs:
        return None
    rank = len(b.args[0].shape)
    perm = list(range(rank))
    try:
        if b.sym == "aten.t.default":
            if rank == 2:
                perm = [1, 0]
        elif b.sym == "aten.transpose.int":
            d0, d1 = (int(d) % max(rank, 1) for d in b.args[1:3])
            perm[d0], perm[d1] = perm[d1], perm[d0]
        else:
            perm = [int(d) % max(rank, 1) for d in b.args[1]]
    except (TypeError, ValueError, IndexError):
        return None
    return perm if sorted(perm) == list(range(rank)) else None


def _clone_keeps_layout(b: BoundSymbol) -> Optional[TensorProxy]:
    """Return ``x`` when ``b`` is ``clone(x)`` whose output has ``x``'s layout, else None."""
    if b.sym != "prims.clone" or len(b.args) != 1 or not isinstance(b.args[0], TensorProxy):
        return None
    if set(b.kwargs) - {"memory_format"}:
        return None
    x, out = b.args[0], b.outputs
    if not isinstance(out, TensorProxy) or x.strides is None or out.strides is None:
        return None  # without recorded strides a layout-preserving copy cannot be told from a relayout
    return x if _same_value(x, out) else None


@functools.lru_cache(maxsize=None)
def _overload_returns_alias(name: str) -> bool:
    from ..resolve import UnknownSymbol, resolve_overload
    try:
        schema = resolve_overload(name)._schema
    except (UnknownSymbol, AttributeError):
        return True  # unknown: assume it may alias
    return any(r.alias_info is not None for r in schema.returns)


def returns_alias(b: BoundSymbol) -> bool:
    """True when ``b``'s outputs may share storage with its inputs (views, ``detach``, unknown ops)."""
    if b.sym in _ALIASING_NAMES or b.sym in _TRANSPOSES:
        return True
    name = b.aten or (b.sym if b.sym.startswith("aten.") else None)
    return True if name is None else _overload_returns_alias(name)


class _TopLevel:
    """What the top-level walk knows: where each value was made and how often it is read."""

    def __init__(self, trace: Trace):
        self.keep = {p.name for p in trace.flat_outputs()}
        self.inputs = {p.name for p in trace.inputs}
        self.reads: dict[str, int] = {}
        for b in trace.symbols:
            for p in b.flat_inputs():
                self.reads[p.name] = self.reads.get(p.name, 0) + 1
        # Values whose storage reaches an output through views: renaming them changes aliasing.
        self.escapes = set(self.keep)
        for b in reversed(trace.symbols):
            if returns_alias(b) and any(p.name in self.escapes for p in b.flat_outputs()):
                self.escapes.update(p.name for p in b.flat_inputs())
        self.made_at: dict[str, int] = {}  # value name -> index in ``out`` of the symbol making it
        self.out: list[Optional[BoundSymbol]] = []

    def maker(self, name: str) -> Optional[BoundSymbol]:
        k = self.made_at.get(name)
        return None if k is None else self.out[k]

    def private(self, name: str) -> bool:
        """True when only one symbol reads ``name`` and the trace does not return it."""
        return name not in self.keep and name not in self.inputs and self.reads.get(name, 0) == 1

    def sole_owner(self, name: str) -> bool:
        """True when ``name``'s storage is reachable through ``name`` alone and one symbol reads it:
        made here by an op returning fresh storage, or a view (read once) of such a value."""
        for _ in range(64):
            if not self.private(name):
                return False
            b = self.maker(name)
            if b is None:
                return False
            if not returns_alias(b):
                return True
            srcs = b.flat_inputs()
            if len(srcs) != 1 or len(b.flat_outputs()) != 1:  # split's other pieces share the storage
                return False
            name = srcs[0].name
        return False

    def move_name(self, x: TensorProxy, y: TensorProxy, drop: tuple[str, ...] = ()) -> None:
        """Make the symbol that made ``x`` make ``y`` instead; drop the symbols making ``drop``."""
        k = self.made_at.pop(x.name)
        self.out[k] = _rename_outputs(self.out[k], {x.name: y})
        self.made_at[y.name] = k
        for name in drop:
            self.out[self.made_at.pop(name)] = None


def _rename_outputs(b: BoundSymbol, names: dict[str, TensorProxy]) -> BoundSymbol:
    """Return ``b`` with the values ``names`` maps renamed wherever ``b`` or its subsymbols use them."""
    def sub(v):
        return names.get(v.name, v) if isinstance(v, TensorProxy) else v
    subs = tuple(_rename_outputs(s, names) for s in b.subsymbols)
    return b.replace(args=map_structure(sub, b.args), kwargs=map_structure(sub, b.kwargs),
                     outputs=map_structure(sub, b.outputs), subsymbols=subs)


class _Either:
    """Membership in either of two name sets, without copying them: a decomposed symbol's walk
    keeps its outputs and the trace's (copying the trace's outputs for every decomposed symbol
    was quadratic in the trace)."""

    __slots__ = ("first", "second")

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __contains__(self, name) -> bool:
        return name in self.first or name in self.second


def _simplify_list(symbols: tuple, keep, rename: dict[str, TensorProxy],
                   top: Optional[_TopLevel] = None) -> list[BoundSymbol]:
    def sub(v):
        return rename.get(v.name, v) if isinstance(v, TensorProxy) else v

    out: list = top.out if top is not None else []
    for b in symbols:
        if b.sym == "del":
            out.append(b)
            continue
        if rename and any(p.name in rename for p in b.flat_inputs()):
            b = b.replace(args=map_structure(sub, b.args), kwargs=map_structure(sub, b.kwargs))
        if b.subsymbols:
            own = _Either(keep, {p.name for p in b.flat_outputs()})
            subs = _simplify_list(b.subsymbols, own, rename)
            if len(subs) != len(b.subsymbols) or any(s is not t for s, t in zip(subs, b.subsymbols)):
                b = b.replace(subsymbols=tuple(subs))
        if top is not None:
            if _remove_at_top(b, top, rename):
                continue
            for p in b.flat_outputs():
                top.made_at[p.name] = len(out)
        else:
            # Inside a decomposed symbol every value is internal: the parent's outputs are made
            # fresh by whichever executor runs it, so readers may read x directly.
            x = identity_source(b)
            if x is not None and b.outputs.name not in keep:
                rename[b.outputs.name] = rename.get(x.name, x)
                continue
        out.append(b)
    return [b for b in out if b is not None]


def _cancelled_transpose(b: BoundSymbol, top: _TopLevel) -> Optional[tuple[TensorProxy, str]]:
    """Return ``(x, u)`` when ``b`` transposes ``u``, ``u`` is a transpose of ``x`` and the two
    cancel (``b``'s output is ``x`` in value and layout); else None."""
    perm = transpose_perm(b)
    if perm is None:
        return None
    u = b.args[0]
    first = top.maker(u.name)
    first_perm = transpose_perm(first) if first is not None else None
    if first_perm is None or len(first_perm) != len(perm):
        return None
    if any(first_perm[perm[i]] != i for i in range(len(perm))) or not _same_value(first.args[0], b.outputs):
        return None
    return first.args[0], u.name


def _remove_at_top(b: BoundSymbol, top: _TopLevel, rename: dict[str, TensorProxy]) -> bool:
    """Remove ``b`` when it is an identity (see the module docstring) and removing it changes
    nothing anyone can observe; True when removed.

    Readers of ``y`` read ``x`` instead when ``y`` is internal. When ``b`` makes a new tensor
    (``mul(x, 1)``, a clone ...) and a view of ``y`` reaches the trace's outputs, that view would
    come to share ``x``'s storage, so this needs ``x`` to be storage nobody else can see. A returned
    ``y`` keeps its name: the symbol that made ``x`` makes ``y`` instead, when nothing else reads
    ``x`` (and, for new tensors, nothing else can see its storage)."""
    y = b.outputs
    if not isinstance(y, TensorProxy):
        return False
    chain: tuple[str, ...] = ()
    x = identity_source(b)
    if x is not None:
        copies = b.sym not in _ALIAS_IDENTITIES
    else:
        cancelled = _cancelled_transpose(b, top)
        if cancelled is not None:
            (x, u), copies = cancelled, False
            chain = (u,)
        else:
            x, copies = _clone_keeps_layout(b), True
            if x is None:
                return False
    if y.name not in top.keep:
        if copies and y.name in top.escapes and not top.sole_owner(x.name):
            return False
        # y's readers read x now; a cancelled pair's first transpose still reads x until dce.
        top.reads[x.name] = top.reads.get(x.name, 0) + top.reads.get(y.name, 0) - (0 if chain else 1)
        if y.name in top.escapes:
            top.escapes.add(x.name)
        rename[y.name] = x
        return True
    if chain and not top.private(chain[0]):
        return False
    if top.maker(x.name) is None or not (top.sole_owner(x.name) if copies else top.private(x.name)):
        return False
    top.move_name(x, y, drop=chain)
    return True


def simplify(trace: Trace) -> Trace:
    """Return ``trace`` without identity symbols (see the module docstring); uids kept."""
    top = _TopLevel(trace)
    rename: dict[str, TensorProxy] = {}
    symbols = _simplify_list(trace.symbols, top.keep, rename, top)
    if len(symbols) == len(trace.symbols) and all(a is b for a, b in zip(symbols, trace.symbols)):
        return trace
    return trace.replace(symbols=tuple(symbols))
