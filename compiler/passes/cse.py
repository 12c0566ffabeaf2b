"""Pass ``cse``: common-subexpression elimination over top-level symbols.

Two symbols with the same operation and the same arguments compute the same value, unless the
operation draws random numbers. The later one is dropped, its outputs are renamed to the earlier
one's everywhere after it, and the survivor's ``origin`` lists both uids.
"""
from __future__ import annotations

from ..collectives import is_communication
from ..ir import BoundSymbol, Trace, TensorProxy, map_structure
from ..prims import PRIMS

NAME = "cse"

_RANDOM = ("rand", "randn", "rand_like", "randn_like", "bernoulli", "native_dropout", "dropout",
           "randint", "randint_like", "normal", "normal_functional", "uniform", "log_normal", "multinomial",
           "randperm", "empty",
           "empty_like", "empty_strided")


def _is_random(b: BoundSymbol) -> bool:
    name = (b.aten or b.sym).split(".")
    base = name[1] if len(name) > 1 else name[0]
    return base in _RANDOM or any(_is_random(s) for s in b.subsymbols)


def _key(b: BoundSymbol):
    def k(v):
        if isinstance(v, TensorProxy):
            return ("P", v.name)
        if isinstance(v, (list, tuple)):
            return (type(v).__name__,) + tuple(k(x) for x in v)
        if isinstance(v, dict):
            return ("K",) + tuple((a, k(x)) for a, x in sorted(v.items()))
        return ("C", type(v).__name__, repr(v))
    return (b.sym, b.aten, k(b.args), k(b.kwargs))


def _renamed(b: BoundSymbol, sub) -> BoundSymbol:
    """Return ``b`` reading renamed proxies, in its subsymbols too (they read the parent's inputs)."""
    return b.replace(args=map_structure(sub, b.args), kwargs=map_structure(sub, b.kwargs),
                     subsymbols=tuple(_renamed(s, sub) for s in b.subsymbols))


def _reads_any(b: BoundSymbol, names: dict) -> bool:
    """True when ``b`` or one of its subsymbols reads a value named in ``names`` (rebuilding every
    symbol after the first merge, renamed or not, cost more than the rest of the pass)."""
    return any(p.name in names for p in b.flat_inputs()) or any(_reads_any(s, names) for s in b.subsymbols)


def cse(trace: Trace) -> Trace:
    """Return ``trace`` without repeated computations."""
    seen: dict = {}
    rename: dict[str, TensorProxy] = {}
    out: list[BoundSymbol] = []
    index: dict[str, int] = {}

    def sub(v):
        return rename.get(v.name, v) if isinstance(v, TensorProxy) else v

    for b in trace.symbols:
        if rename and _reads_any(b, rename):
            b = _renamed(b, sub)
        if _is_random(b) or b.sym == "del" or is_communication(b.sym):
            out.append(b)
            continue
        key = _key(b)
        first = seen.get(key)
        if first is None:
            seen[key] = b
            index[b.uid] = len(out)
            out.append(b)
            continue
        for mine, theirs in zip(b.flat_outputs(), first.flat_outputs()):
            rename[mine.name] = theirs
        i = index[first.uid]
        merged = out[i].replace(origin=tuple(dict.fromkeys(out[i].origin + (first.uid, b.uid))))
        out[i] = merged
        seen[key] = merged
    outputs = map_structure(sub, trace.outputs)
    return trace.replace(symbols=tuple(out), outputs=outputs)
