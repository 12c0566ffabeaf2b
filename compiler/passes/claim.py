"""Pass ``claim``: assigns an executor to every symbol.

Executors are tried in order. An executor that can run a symbol claims it. A decomposed symbol that
the first executors cannot run whole is flattened into its prims when one of them can run some of
those prims (so fusion executors see prims); each prim then goes to the first executor that can run
it. ``torch`` comes last and runs anything, recording why the others did not. The flattened
symbols stay reachable in memory under ``trace.meta[DECOMPOSED]`` (see below).
"""
from __future__ import annotations

from typing import Sequence

from ..collectives import CLAIM_NOTE, is_communication
from ..executors.base import Executor
from ..ir import BoundSymbol, Trace
from .cse import _is_random

NAME = "claim"
# ``trace.meta`` key: {uid: the decomposed ATen symbol} of the symbols flattened into their prims
# (in memory only: meta values that are not plain scalars are never serialized or recorded). The
# fast CPU path runs a region holding all of such a symbol's prims as the one ATen call.
DECOMPOSED = "decomposed"


def _claim_one(b: BoundSymbol, executors: Sequence[Executor]) -> list[BoundSymbol]:
    if is_communication(b.sym):  # collectives and waits stay opaque torch ops (see collectives.py)
        torch_ex = next((ex for ex in executors if ex.name == "torch" and ex.can_run(b)), None)
        if torch_ex is not None:
            return [b.replace(executor="torch", note=CLAIM_NOTE)]
    for ex in executors:
        if ex.can_run(b):
            note = b.note
            if ex.name == "torch" and note is None and len(executors) > 1:
                others = [e for e in executors if e.name != "torch"]
                note = "; ".join(_why_not(e, b) for e in others) or None
            return [b.replace(executor=ex.name, note=note)]
        if b.subsymbols and any(ex.can_run(s) for s in b.subsymbols):
            out = []
            for s in b.subsymbols:
                out.extend(_claim_one(s, executors))
            return out
    return [b.replace(executor=None, note=(b.note or "") + " (no executor can run it)")]


def _why_not(ex: Executor, b: BoundSymbol) -> str:
    """Why ``ex`` does not run ``b``. For a decomposed ATen op (it reaches torch whole only when
    ``ex`` runs none of its prims) that is its first prim's reason, e.g. the dtype, not that the
    op itself is no prim."""
    if b.subsymbols and not b.sym.startswith("prims."):
        for s in b.subsymbols:
            if not ex.can_run(s):
                return ex.why_not(s)
    return ex.why_not(b)


def claim(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """Return ``trace`` with ``executor`` set on every symbol, flattening where that lets fusion
    executors run prims."""
    out: list[BoundSymbol] = []
    flattened: set[int] = set()  # ids of prims taken out of a decomposed symbol
    parents: dict[str, BoundSymbol] = {}
    for b in trace.symbols:
        if b.sym == "del":
            out.append(b)
        else:
            claimed = _claim_one(b, executors)
            if len(claimed) != 1 or claimed[0].uid != b.uid:
                flattened.update(id(s) for s in claimed)
                if b.subsymbols and b.sym.startswith("aten."):
                    parents[b.uid] = b
            out.extend(claimed)
    meta = {**trace.meta, DECOMPOSED: parents} if parents else trace.meta
    return trace.replace(symbols=_without_dead(out, flattened, trace), meta=meta)


def _without_dead(symbols: list[BoundSymbol], flattened: set[int], trace: Trace) -> tuple:
    """Drop the symbols nothing reads once flattening made them dead: a decomposition may compute
    values its parent's outputs do not need, and then what only they read is dead too. Without
    flattening nothing changes (``dce`` ran before claim)."""
    if not flattened:
        return tuple(symbols)
    live = {p.name for p in trace.flat_outputs()}
    keep = []
    for b in reversed(symbols):
        outs = b.flat_outputs()
        if b.sym != "del" and outs and not any(p.name in live for p in outs) and not _is_random(b):
            continue
        keep.append(b)
        live.update(p.name for p in b.flat_inputs())
    return tuple(reversed(keep))
