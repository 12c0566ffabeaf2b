"""Pass ``claim``: assigns an executor to every symbol.

Executors are tried in order. An executor that can run a symbol claims it. A decomposed symbol that
the first executors cannot run whole is flattened into its prims when one of them can run some of
those prims (so fusion executors see prims); each prim then goes to the first executor that can run
it. ``torch`` comes last and runs anything, recording why the others did not.
"""
from __future__ import annotations

from typing import Sequence

from ..collectives import CLAIM_NOTE, is_communication
from ..executors.base import Executor
from ..ir import BoundSymbol, Trace

NAME = "claim"


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
                note = "; ".join(e.why_not(b) for e in others) or None
            return [b.replace(executor=ex.name, note=note)]
        if b.subsymbols and any(ex.can_run(s) for s in b.subsymbols):
            out = []
            for s in b.subsymbols:
                out.extend(_claim_one(s, executors))
            return out
    return [b.replace(executor=None, note=(b.note or "") + " (no executor can run it)")]


def claim(trace: Trace, executors: Sequence[Executor]) -> Trace:
    """Return ``trace`` with ``executor`` set on every symbol, flattening where that lets fusion
    executors run prims."""
    out: list[BoundSymbol] = []
    for b in trace.symbols:
        if b.sym == "del":
            out.append(b)
        else:
            out.extend(_claim_one(b, executors))
    return trace.replace(symbols=tuple(out))
