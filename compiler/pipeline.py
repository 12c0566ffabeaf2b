"""The pass pipeline: runs the passes of one chain in order and reports each to the observer.

Each pass is a pure ``Trace -> Trace`` function. The pipeline stamps the result with the pass name
and duration, decides whether it changed anything, runs the trace checks in debug mode, and hands
the trace to the observer before the next pass starts, so a recording holds every pass even when a
later one fails.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from .check import check_trace
from .executors.base import Executor, get_executor
from .ir import Trace
from .observer import CompileObserver, compiling
from .passes.claim import claim
from .passes.codegen import codegen, codegen_plan
from .profiling import ProfileSettings, build_profiled_chain
from .passes.cse import cse
from .passes.dce import dce
from .passes.decompose import decompose
from .passes.liveness import insert_dels
from .passes.simplify import simplify


@dataclass
class CompileOptions:
    """How to compile: executor names in priority order (None: the default order for the device),
    debug checks after every pass, the observer to report to, and run-time profiling / input capture
    (None: off, and the compiled callable is exactly the plain generated function)."""

    executors: Optional[Sequence[str]] = None
    debug: bool = False
    observer: CompileObserver = field(default_factory=CompileObserver)
    profile: Optional[ProfileSettings] = None


def default_executor_names(device: str = "cpu") -> list[str]:
    """Return the default executor order for a device type: fusion executors first, torch last."""
    names = []
    try:
        from .executors import fusion_executor_names
        names.extend(fusion_executor_names(device))
    except ImportError:
        pass
    return names + ["torch"]


def resolve_executors(names: Optional[Sequence[str]], device: str = "cpu") -> list[Executor]:
    """Return executor objects for ``names`` (None: defaults), ``torch`` always appended last."""
    names = list(names) if names else default_executor_names(device)
    if "torch" not in names:
        names.append("torch")
    names = [n for n in names if n != "torch"] + ["torch"]
    return [get_executor(n) for n in names]


def _changed(a: Trace, b: Trace) -> bool:
    return a.symbols != b.symbols or a.outputs != b.outputs or a.inputs != b.inputs


def chain_passes(executors: Sequence[Executor]) -> list[tuple[str, Callable[[Trace], Trace]]]:
    """Return the (name, pass) list for a forward/backward/inference chain, codegen excluded."""
    # simplify before dce: what simplify leaves unread (the first of two cancelling transposes,
    # say) is dead code.
    passes = [("decompose", decompose), ("cse", cse), ("simplify", simplify), ("dce", dce),
              ("claim", functools.partial(claim, executors=executors))]
    for ex in executors:
        passes.extend(getattr(ex, "passes", lambda: [])())
    passes.append(("liveness", insert_dels))
    return passes


class PassRunner:
    """Runs passes on one chain, numbering them from ``start`` and reporting each."""

    def __init__(self, graph: int, chain: str, options: CompileOptions, start: int = 0):
        self.graph, self.chain, self.options, self.index = graph, chain, options, start

    def report(self, name: str, before: Optional[Trace], after: Trace, seconds: float) -> Trace:
        """Stamp ``after`` with the pass name and time, check it in debug mode, report it."""
        after = after.replace(pass_name=name, meta={**after.meta, "duration_ms": seconds * 1e3})
        if self.options.debug:
            check_trace(after)
        changed = True if before is None else _changed(before, after)
        self.options.observer.pass_done(self.graph, self.chain, self.index, name, after, seconds, changed)
        self.index += 1
        return after

    def run(self, name: str, fn: Callable[[Trace], Trace], trace: Trace) -> Trace:
        """Run one pass on ``trace`` and report it."""
        t0 = time.perf_counter()
        out = fn(trace)
        return self.report(name, trace, out, time.perf_counter() - t0)


def _report_kernels(trace: Trace, observer: CompileObserver) -> Trace:
    """Hand the kernel records a fusion pass left in ``trace.meta["kernels"]`` to the observer and
    return the trace without them."""
    kernels = trace.meta.get("kernels")
    if kernels is None:
        return trace
    if kernels:
        observer.kernels_built(trace.graph, trace.chain, kernels)
    return trace.replace(meta={k: v for k, v in trace.meta.items() if k != "kernels"})


def compile_chain(trace: Trace, options: CompileOptions) -> tuple[Trace, Callable]:
    """Run the whole pipeline on an acquired trace (already reported as pass 0) and return
    (execution trace, boxed callable)."""
    device = trace.inputs[0].device.split(":")[0] if trace.inputs else "cpu"
    executors = resolve_executors(options.executors, device)
    runner = PassRunner(trace.graph, trace.chain, options, start=1)
    with compiling(options.observer, trace.graph, trace.chain):
        for name, fn in chain_passes(executors):
            trace = runner.run(name, fn, trace)
            trace = _report_kernels(trace, options.observer)
        t0 = time.perf_counter()
        if options.profile is None:
            final, fn = codegen(trace, executors)
        else:
            final, fn, plan = codegen_plan(trace, executors)
            fn = build_profiled_chain(final, executors, options.profile, options.observer, fn, plan)
    final = runner.report("codegen", trace, final, time.perf_counter() - t0)
    return final, fn
