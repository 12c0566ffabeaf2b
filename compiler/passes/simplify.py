"""Pass ``simplify``: removes prims that return their input unchanged.

Decompositions leave identities behind: ``addmm`` becomes ``mm`` plus ``mul(bias, 1)``, ``mul(mm, 1)``
and an add; views and conversions to the shape or dtype a value already has appear too. Each one
would otherwise become work for a fusion (or a kernel of its own). A prim ``y = op(x, ...)`` is
dropped when ``y`` has exactly ``x``'s shape and dtype and is one of:

- ``mul(x, 1)``, ``mul(1, x)``, ``div(x, 1)``, ``sub(x, 0)`` (bitwise exact, NaN and -0.0 included;
  ``add(x, 0)`` is not: it turns -0.0 into +0.0, so it stays),
- ``convert_element_type(x, dtype of x)``, ``view`` / ``expand`` to ``x``'s own shape, the identity
  ``permute``,

and, where both strides are recorded, ``y`` has ``x``'s strides (the same values in another layout
are not the same to kernels that index by strides).

Later readers of ``y`` read ``x`` instead. This applies at the top level and inside the ``subsymbols``
of decomposed symbols. A value the trace returns, or a decomposed symbol's own output, is kept (its
name is part of the interface). Everything else keeps its uid, names and position, so the diff of
this pass shows exactly the removed symbols.
"""
from __future__ import annotations

from typing import Optional

from ..ir import BoundSymbol, Trace, TensorProxy, map_structure

NAME = "simplify"
# ``_to_copy`` keywords that cannot change anything but dtype / device (checked on the proxies).
_PLAIN_COPY_KWARGS = frozenset({"dtype", "device", "layout", "pin_memory", "non_blocking"})


def _is_number(v, value) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == value


def identity_source(b: BoundSymbol) -> Optional[TensorProxy]:
    """Return the input ``b`` returns unchanged (None when ``b`` is not an identity)."""
    out = b.outputs
    if not isinstance(out, TensorProxy) or not b.sym.startswith("prims.") or not b.args:
        return None
    name = b.sym.removeprefix("prims.")
    x = None
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
    if x is None or tuple(x.shape) != tuple(out.shape) or x.dtype != out.dtype or x.device != out.device:
        return None
    if x.strides is not None and out.strides is not None and tuple(x.strides) != tuple(out.strides):
        return None  # same values, other layout: later kernels index by the recorded strides
    return x


def _simplify_list(symbols: tuple, keep: set[str], rename: dict[str, TensorProxy]) -> list[BoundSymbol]:
    def sub(v):
        return rename.get(v.name, v) if isinstance(v, TensorProxy) else v

    out = []
    for b in symbols:
        if b.sym == "del":
            out.append(b)
            continue
        if rename and any(p.name in rename for p in b.flat_inputs()):
            b = b.replace(args=map_structure(sub, b.args), kwargs=map_structure(sub, b.kwargs))
        if b.subsymbols:
            own = keep | {p.name for p in b.flat_outputs()}
            subs = _simplify_list(b.subsymbols, own, rename)
            if len(subs) != len(b.subsymbols) or any(s is not t for s, t in zip(subs, b.subsymbols)):
                b = b.replace(subsymbols=tuple(subs))
        x = identity_source(b)
        if x is not None and b.outputs.name not in keep:
            rename[b.outputs.name] = rename.get(x.name, x)
            continue
        out.append(b)
    return out


def simplify(trace: Trace) -> Trace:
    """Return ``trace`` without identity prims (see the module docstring); uids and names kept."""
    keep = {p.name for p in trace.flat_outputs()}
    rename: dict[str, TensorProxy] = {}
    symbols = _simplify_list(trace.symbols, keep, rename)
    if len(symbols) == len(trace.symbols) and all(a is b for a, b in zip(symbols, trace.symbols)):
        return trace
    return trace.replace(symbols=tuple(symbols))
