"""Pass ``dce``: dead-code elimination. Drops symbols none of whose outputs is used; communication
ops stay (every rank must issue the same collectives)."""
from __future__ import annotations

from ..collectives import is_communication
from ..ir import Trace

NAME = "dce"


def dce(trace: Trace) -> Trace:
    """Return ``trace`` without symbols whose outputs nothing reads (walking backwards)."""
    live = {p.name for p in trace.flat_outputs()}
    keep = []
    for b in reversed(trace.symbols):
        outs = b.flat_outputs()
        if b.sym != "del" and outs and not any(p.name in live for p in outs) and not is_communication(b.sym):
            continue
        keep.append(b)
        live.update(p.name for p in b.flat_inputs())
    return trace.replace(symbols=tuple(reversed(keep)))
