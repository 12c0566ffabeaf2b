"""Split reductions: on a GPU, a whole tensor reduced to one value runs over many programs.

A reduction of ``N`` elements to one value (one row) would be walked by one program. When ``N``
is large and divides into ``S`` slices of at least 1024 elements, the region is rewritten into two
launches (:mod:`.triton_plan`'s ``launches`` plan): the first reduces each of the ``S`` slices
(``view`` to ``[S, N / S]`` and reduce dim 1, with every op before the reduction) into a scratch
vector, the second reduces the ``S`` partial results and runs the ops after the reduction. Only
``sum``, ``amax``, ``amin``, ``mean``, ``any`` and ``all`` are split (their partial results combine
with the same op; ``var``'s do not), when everything after the reduction works on its one value;
anything else keeps the single program.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from .triton_region import GPU_ROW_BLOCK, prim_name, reduction_domain
from .triton_index import numel

SPLIT_MIN = 4 * GPU_ROW_BLOCK  # below this one program's loop is cheap enough
# Reductions whose partial results combine with the same op: ``mean`` too, as every slice has the
# same size (the mean of equal slices' means is the mean).
_ATEN = {"sum": "aten.sum.dim_IntList", "amax": "aten.amax.default", "amin": "aten.amin.default",
         "mean": "aten.mean.dim", "any": "aten.any.dims", "all": "aten.all.dims"}


def split_region(members: list[BoundSymbol], outputs: list[TensorProxy]) -> Optional[tuple]:
    """Return (first part's symbols, its outputs, second part's symbols, scratch proxy) rewriting a
    region whose one reduction takes a whole large tensor to one value; None when it does not apply."""
    reds = [i for i, b in enumerate(members) if prim_name(b) in ops.REDUCTIONS]
    if len(reds) != 1 or prim_name(members[reds[0]]) not in _ATEN:
        return None
    r = members[reds[0]]
    M, N, _ = reduction_domain(r)
    if M != 1 or N < SPLIT_MIN or not isinstance(r.outputs, TensorProxy):
        return None
    S = next((s for s in (1024, 512, 256, 128, 64, 32, 16, 8) if N % s == 0 and N // s >= 1024), None)
    if S is None:
        return None
    producer = {p.name: i for i, b in enumerate(members) for p in b.flat_outputs()}
    after: set = {reds[0]}
    for i, b in enumerate(members):
        if any(producer.get(p.name) in after for p in b.flat_inputs()):
            after.add(i)
    if any(numel(p.shape) != 1 for i in after for p in members[i].flat_outputs()):
        return None  # something after the reduction works on more than its one value
    x, out, name = r.args[0], r.outputs, prim_name(r)
    rows = TensorProxy(f"{out.name}_rows", (S, N // S), x.dtype, x.device, (N // S, 1))
    part = TensorProxy(f"{out.name}_part", (S,), out.dtype, out.device, (1,))
    whole = TensorProxy(f"{out.name}_all", (), out.dtype, out.device, ())
    like = dict(uid=r.uid, origin=r.origin, source=r.source, seq_nr=r.seq_nr)
    view = BoundSymbol("prims.view", (x, [S, N // S]), {}, rows, aten="aten.view.default", **like)
    first = BoundSymbol(r.sym, (rows, [1], False), {}, part, aten=_ATEN[name], **like)
    second = BoundSymbol(r.sym, (part, [0], False), {}, whole if tuple(out.shape) != () else out,
                         aten=_ATEN[name], **like)
    tail = [second]
    if tuple(out.shape) != ():
        tail.append(BoundSymbol("prims.view", (whole, list(out.shape)), {}, out, aten="aten.view.default", **like))
    before = [b for i, b in enumerate(members) if i not in after]
    later = [b for i, b in enumerate(members) if i in after and i != reds[0]]
    made_first = {p.name for b in before for p in b.flat_outputs()}
    first_outs = [part] + [p for p in outputs if p.name in made_first]
    return before + [view, first], first_outs, tail + later, part


__all__ = ["split_region", "dataclasses"]
