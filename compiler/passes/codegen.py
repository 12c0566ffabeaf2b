"""Pass ``codegen``: turns the final trace into Python source and a callable.

The source is generated from the in-memory trace (never from text read back from a recording): each
top-level symbol becomes a call of the callable its executor provides, bound under a readable name.
The function takes its inputs boxed (a list it clears, so inputs can be freed early), as
AOTAutograd's boxed calling convention expects.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import torch

from ..executors.base import Executor
from ..ir import Trace
from ..printer import call_text
from ..values import format_value, is_valid_name

NAME = "codegen"


class CodegenError(Exception):
    """The trace cannot be turned into Python (invalid names, unclaimed symbols)."""


def _callee_name(sym: str, taken: dict, fn) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", sym)
    name = base
    i = 1
    while name in taken and taken[name] is not fn:
        name = f"{base}_{i}"
        i += 1
    return name


def generate_source(trace: Trace, executors: Sequence[Executor]) -> tuple[str, dict]:
    """Return (Python source of the boxed function, namespace of callables it needs)."""
    by_name = {e.name: e for e in executors}
    namespace: dict[str, Callable] = {"torch": torch}
    cache: dict = {}
    fname = trace.chain if trace.chain.isidentifier() else "fn"
    for p in trace.inputs:
        if not is_valid_name(p.name):
            raise CodegenError(f"invalid input name {p.name!r}")
    lines = [f"def {fname}(args):"]
    if trace.inputs:
        names = ", ".join(p.name for p in trace.inputs)
        lines.append(f"  {names}{',' if len(trace.inputs) == 1 else ''} = args")
    lines.append("  args.clear()")
    for b in trace.symbols:
        if b.sym == "del":
            lines.append("  " + call_text(b))
            continue
        for p in b.flat_outputs():
            if not is_valid_name(p.name):
                raise CodegenError(f"invalid proxy name {p.name!r}")
        ex = by_name.get(b.executor or "")
        if ex is None:
            raise CodegenError(f"symbol {b.uid} ({b.sym}) has no executor")
        key = (ex.name, b.sym, b.aten) if not ex.fuses else (ex.name, b.uid)
        fn = cache.get(key)
        if fn is None:
            fn = ex.callable_for(b)
            cache[key] = fn
        callee = _callee_name(b.sym if not b.aten or ex.fuses else b.aten, namespace, fn)
        namespace[callee] = fn
        lines.append("  " + call_text(b, callee))
    outs = ", ".join(format_value(o) for o in trace.outputs)
    lines.append(f"  return ({outs}{',' if len(trace.outputs) == 1 else ''})")
    return "\n".join(lines) + "\n", namespace


def codegen(trace: Trace, executors: Sequence[Executor]) -> tuple[Trace, Callable]:
    """Return (the execution trace with its Python in ``meta['python']``, the boxed callable)."""
    source, namespace = generate_source(trace, executors)
    code = compile(source, f"<thundervis graph {trace.graph} {trace.chain}>", "exec")
    exec(code, namespace)  # source generated above from the in-memory trace only
    fn = namespace[trace.chain if trace.chain.isidentifier() else "fn"]
    fn._boxed_call = True
    return trace.replace(meta={**trace.meta, "python": source}), fn
