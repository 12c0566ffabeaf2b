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


def _plan(trace: Trace, executors: Sequence[Executor]) -> tuple[dict, list]:
    """Return (namespace of callables, [(symbol, callee name or None for ``del``)]) for ``trace``."""
    by_name = {e.name: e for e in executors}
    namespace: dict[str, Callable] = {"torch": torch}
    cache: dict = {}
    for p in trace.inputs:
        if not is_valid_name(p.name):
            raise CodegenError(f"invalid input name {p.name!r}")
    calls = []
    for b in trace.symbols:
        if b.sym == "del":
            calls.append((b, None))
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
        calls.append((b, callee))
    return namespace, calls


# Names the instrumented variants use; proxies and callees never start with "_tv_".
PROFILER_NAME = "_tv_profiler"
_TOKEN = "_tv_mark"


def _render(trace: Trace, calls: list, timing: bool = False, capture: frozenset = frozenset()) -> str:
    """Return the boxed function's source; with ``timing``/``capture`` add the profiler hooks
    around each called symbol (index = position among the non-``del`` symbols)."""
    fname = trace.chain if trace.chain.isidentifier() else "fn"
    lines = [f"def {fname}(args):"]
    if trace.inputs:
        names = ", ".join(p.name for p in trace.inputs)
        lines.append(f"  {names}{',' if len(trace.inputs) == 1 else ''} = args")
    lines.append("  args.clear()")
    if timing:
        lines.append(f"  {PROFILER_NAME}.begin_call()")
    index = 0
    for b, callee in calls:
        if callee is None:
            lines.append("  " + call_text(b))
            continue
        if index in capture:
            ins = ", ".join(dict.fromkeys(p.name for p in b.flat_inputs()))
            lines.append(f"  {PROFILER_NAME}.capture({index}, ({ins}{',' if ins and ',' not in ins else ''}))")
        if timing:
            lines.append(f"  {_TOKEN} = {PROFILER_NAME}.start({index})")
        lines.append("  " + call_text(b, callee))
        if timing:
            lines.append(f"  {PROFILER_NAME}.stop({index}, {_TOKEN})")
        index += 1
    if timing:
        lines.append(f"  {PROFILER_NAME}.end_call()")
    outs = ", ".join(format_value(o) for o in trace.outputs)
    lines.append(f"  return ({outs}{',' if len(trace.outputs) == 1 else ''})")
    return "\n".join(lines) + "\n"


def generate_source(trace: Trace, executors: Sequence[Executor]) -> tuple[str, dict]:
    """Return (Python source of the boxed function, namespace of callables it needs)."""
    namespace, calls = _plan(trace, executors)
    return _render(trace, calls), namespace


def _compile_boxed(trace: Trace, source: str, namespace: dict, tag: str = "") -> Callable:
    code = compile(source, f"<thundervis graph {trace.graph} {trace.chain}{tag}>", "exec")
    exec(code, namespace)  # source generated from the in-memory trace only
    fn = namespace[trace.chain if trace.chain.isidentifier() else "fn"]
    fn._boxed_call = True
    return fn


def codegen_plan(trace: Trace, executors: Sequence[Executor]) -> tuple[Trace, Callable, tuple]:
    """Like :func:`codegen`, also returning the plan ``(namespace, calls)`` that
    :func:`instrumented_callable` reuses (so kernels are built once)."""
    namespace, calls = _plan(trace, executors)
    source = _render(trace, calls)
    fn = _compile_boxed(trace, source, namespace)
    return trace.replace(meta={**trace.meta, "python": source}), fn, (namespace, calls)


def codegen(trace: Trace, executors: Sequence[Executor]) -> tuple[Trace, Callable]:
    """Return (the execution trace with its Python in ``meta['python']``, the boxed callable)."""
    final, fn, _ = codegen_plan(trace, executors)
    return final, fn


def instrumented_callable(trace: Trace, plan: tuple, profiler, *, timing: bool = False,
                          capture=()) -> Callable:
    """Return a boxed callable of ``trace`` that calls ``profiler`` around each symbol (``timing``)
    and/or hands the inputs of the symbols whose index is in ``capture`` to ``profiler.capture``.
    ``plan`` comes from :func:`codegen_plan`; the kernels in it are shared, not rebuilt."""
    namespace, calls = plan
    source = _render(trace, calls, timing=timing, capture=frozenset(capture))
    ns = {**namespace, PROFILER_NAME: profiler}
    return _compile_boxed(trace, source, ns, " profiled" if timing else " capture")
