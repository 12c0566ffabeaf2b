"""The reference interpreter: runs any trace symbol by symbol with torch reference semantics.

Fusions and decompositions with subsymbols run their subsymbols, so the interpreter checks that a
lowering means what its parent means. Used by tests, rerun's numerics check and the debug mode.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .ir import BoundSymbol, Trace, TensorProxy, flatten, map_structure
from .resolve import resolve_symbol


def _bind(env: dict, outputs, values) -> None:
    if isinstance(outputs, TensorProxy):
        env[outputs.name] = values
    elif isinstance(outputs, (tuple, list)):
        for o, v in zip(outputs, values):
            _bind(env, o, v)


def _read(env: dict, x):
    return map_structure(lambda v: env[v.name] if isinstance(v, TensorProxy) else v, x)


def run_symbol(b: BoundSymbol, env: dict, *, expand: bool, resolver: Callable = resolve_symbol) -> None:
    """Run one symbol, reading inputs from and writing outputs into ``env`` (name -> value)."""
    if b.sym == "del":
        for p in b.args:
            env.pop(p.name, None)
        return
    if b.subsymbols and (expand or b.fusion):
        for s in b.subsymbols:
            run_symbol(s, env, expand=expand, resolver=resolver)
        return
    fn = resolver(b.sym)
    result = fn(*_read(env, b.args), **_read(env, b.kwargs))
    _bind(env, b.outputs, result)


def run_trace(trace: Trace, args: Sequence[Any], *, expand: bool = True,
              resolver: Optional[Callable] = None) -> tuple:
    """Run ``trace`` on ``args`` and return its outputs as a tuple.

    ``expand``: run the subsymbols of decomposed symbols (the prims) instead of the parent op.
    """
    if len(args) != len(trace.inputs):
        raise ValueError(f"trace takes {len(trace.inputs)} inputs, got {len(args)}")
    env = {p.name: a for p, a in zip(trace.inputs, args)}
    for b in trace.symbols:
        run_symbol(b, env, expand=expand, resolver=resolver or resolve_symbol)
    return tuple(_read(env, trace.outputs))
