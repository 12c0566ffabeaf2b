"""Pass ``decompose``: lower every ATen symbol to prims where a complete lowering exists.

A symbol that is itself a prim is renamed (``aten.add.Tensor`` -> ``prims.add``) and keeps its uid.
A symbol with a lowering keeps its uid and outputs and gains the prims as ``subsymbols``: executors
choose later whether to run the parent op or its prims. A symbol without a lowering is left as it
is with ``note`` saying why; the torch executor will run it.
"""
from __future__ import annotations

from ..decompositions import NotLowered, lower_symbol
from ..ir import Minter, Trace
from ..prims import prim_for
from ..resolve import UnknownSymbol, is_operator_name, resolve_overload

NAME = "decompose"


def decompose(trace: Trace) -> Trace:
    """Return ``trace`` with ATen symbols renamed to prims or given prim subsymbols."""
    minter = Minter(trace)
    out = []
    for b in trace.symbols:
        if not (b.sym.startswith("aten.") or is_operator_name(b.sym)):  # prims, fusions, del
            out.append(b)
            continue
        try:
            op = resolve_overload(b.sym)
        except UnknownSymbol as e:
            out.append(b.replace(note=f"not lowered: {e}"))
            continue
        prim = prim_for(op)
        if prim is not None:
            out.append(b.replace(sym=f"prims.{prim.name}", origin=(b.uid,), aten=b.sym))
            continue
        try:
            subs = lower_symbol(b, minter)
        except NotLowered as e:
            out.append(b.replace(note=f"not lowered: {e}"))
            continue
        out.append(b.replace(subsymbols=tuple(subs), aten=b.sym))
    return minter.stamp(trace, symbols=tuple(out))
