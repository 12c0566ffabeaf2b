"""Pass ``liveness``: inserts ``del`` after the last use of each value so memory is freed early."""
from __future__ import annotations

from ..ir import BoundSymbol, Minter, Trace

NAME = "liveness"


def insert_dels(trace: Trace) -> Trace:
    """Return ``trace`` with ``del`` symbols after each value's last use (inputs included)."""
    keep = {p.name for p in trace.flat_outputs()}
    last_use: dict[str, int] = {}
    for i, b in enumerate(trace.symbols):
        if b.sym == "del":  # old dels are dropped below; they must not count as uses
            continue
        for p in b.flat_inputs():
            last_use[p.name] = i
        for p in b.flat_outputs():
            last_use.setdefault(p.name, i)
    by_index: dict[int, list] = {}
    proxies = {p.name: p for p in trace.inputs}
    for b in trace.symbols:
        for p in b.flat_inputs() + b.flat_outputs():
            proxies.setdefault(p.name, p)
    for name, i in last_use.items():
        if name not in keep:
            by_index.setdefault(i, []).append(proxies[name])
    minter = Minter(trace)
    out = []
    for i, b in enumerate(trace.symbols):
        if b.sym == "del":
            continue
        out.append(b)
        dead = by_index.get(i)
        if dead:
            out.append(BoundSymbol(sym="del", args=tuple(sorted(dead, key=lambda p: p.name)), kwargs={},
                                   outputs=None, uid=minter.uid()))
    return minter.stamp(trace, symbols=tuple(out))
