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
from .passes import claim as claim_pass, codegen as codegen_pass, cse as cse_pass, dce as dce_pass
from .passes import decompose as decompose_pass, fuse as fuse_pass, liveness as liveness_pass
from .passes import simplify as simplify_pass
from .passes.claim import claim
from .passes.codegen import codegen, codegen_plan
from .passes.cse import cse
from .passes.dce import dce
from .passes.decompose import decompose
from .passes.fuse import fuse
from .passes.liveness import insert_dels
from .passes.simplify import simplify
from .profiling import ProfileSettings, build_profiled_chain


@dataclass
class CompileOptions:
    """How to compile: executor names in priority order (None: the default order for the device),
    debug checks after every pass, the observer to report to, run-time profiling / input capture
    (None: off, and the compiled callable is exactly the plain generated function), and ``aot``: an
    :class:`~.aot.pool.AheadOfTime` that compiles every built kernel for GPU targets (None: no
    targets)."""

    executors: Optional[Sequence[str]] = None
    debug: bool = False
    observer: CompileObserver = field(default_factory=CompileObserver)
    profile: Optional[ProfileSettings] = None
    aot: Optional[object] = None
    cache: Optional[object] = None  # a compile_cache.CompileCache (None: every chain compiles)


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
    """Return executor objects for ``names`` (None: defaults), ``torch`` always appended last.
    Executors from the default order hear so (:meth:`Executor.chosen_by_default`): without CUDA,
    Triton fusions then run through the fast CPU path, while a named ``triton`` runs its kernels in
    Triton's interpreter."""
    chosen = not names
    names = list(names) if names else default_executor_names(device)
    if "torch" not in names:
        names.append("torch")
    names = [n for n in names if n != "torch"] + ["torch"]
    executors = [get_executor(n) for n in names]
    if chosen:
        for ex in executors:
            ex.chosen_by_default(device)
    return executors


def _changed(a: Trace, b: Trace) -> bool:
    return a.symbols != b.symbols or a.outputs != b.outputs or a.inputs != b.inputs


def chain_passes(executors: Sequence[Executor]) -> list[tuple[str, Callable[[Trace], Trace]]]:
    """Return the (name, pass) list for a forward/backward/inference chain, codegen excluded: each
    name is the pass module's ``NAME``; one ``fuse`` per fusion executor, in priority order."""
    # simplify before dce: what simplify leaves unread (the first of two cancelling transposes,
    # say) is dead code.
    passes = [(decompose_pass.NAME, decompose), (cse_pass.NAME, cse), (simplify_pass.NAME, simplify),
              (dce_pass.NAME, dce), (claim_pass.NAME, functools.partial(claim, executors=executors))]
    for ex in executors:
        if ex.fuses:
            passes.append((fuse_pass.NAME, functools.partial(fuse, executor=ex)))
    passes.append((liveness_pass.NAME, insert_dels))
    return passes


class PassRunner:
    """Runs passes on one chain, numbering them from ``start`` and reporting each."""

    def __init__(self, graph: int, chain: str, options: CompileOptions, start: int = 0):
        self.graph, self.chain, self.options, self.index = graph, chain, options, start
        self.kept: Optional[list] = None  # (index, name, changed, seconds, trace, kernels) per pass, for the cache
        self.last_changed = True
        self.seq_base = 0  # the acquired trace's smallest seq_nr (compile_cache.seq_base)

    def report(self, name: str, before: Optional[Trace], after: Trace, seconds: float) -> Trace:
        """Stamp ``after`` with the pass name and time, check it in debug mode, report it."""
        after = after.replace(pass_name=name, meta={**after.meta, "duration_ms": seconds * 1e3})
        if self.options.debug:
            check_trace(after)
        changed = self.last_changed = True if before is None else _changed(before, after)
        self.options.observer.pass_done(self.graph, self.chain, self.index, name, after, seconds, changed)
        self.index += 1
        return after

    def run(self, name: str, fn: Callable[[Trace], Trace], trace: Trace) -> Trace:
        """Run one pass on ``trace`` and report it, then the kernel records it left in
        ``trace.kernels`` (the reported and returned trace no longer holds them)."""
        t0 = time.perf_counter()
        out = fn(trace)
        dt = time.perf_counter() - t0
        kernels = out.kernels
        if kernels:
            out = out.replace(kernels=())
        out = self.report(name, trace, out, dt)
        if self.kept is not None:
            self.kept.append((self.index - 1, name, self.last_changed, dt, out, tuple(kernels or ())))
        if kernels:
            self.options.observer.kernels_built(self.graph, self.chain, list(kernels))
            if self.options.aot is not None:
                self.options.aot.submit(self.graph, self.chain, list(kernels))
        return out


def compile_chain(trace: Trace, options: CompileOptions, start: Optional[int] = None) -> tuple[Trace, Callable]:
    """Run the whole pipeline on an acquired trace, already reported as passes ``0 .. start-1``
    (None: pass 0, ``acquire``, and pass 1 when ``trace`` is the backend's ``remat`` pass) and
    return (execution trace, boxed callable)."""
    if start is None:
        start = 2 if trace.pass_name == "remat" else 1
    device = trace.inputs[0].device.split(":")[0] if trace.inputs else "cpu"
    executors = resolve_executors(options.executors, device)
    runner = PassRunner(trace.graph, trace.chain, options, start=start)
    key = hit = None
    with compiling(options.observer, trace.graph, trace.chain):
        if options.cache is not None:
            key, hit = _from_cache(options, trace, start, executors, runner)
        if hit is not None:
            trace = hit
        else:
            for name, fn in chain_passes(executors):
                trace = runner.run(name, fn, trace)
        t0 = time.perf_counter()
        if options.profile is None:
            final, fn = codegen(trace, executors)
        else:
            final, fn, plan = codegen_plan(trace, executors)
            fn = build_profiled_chain(final, executors, options.profile, options.observer, fn, plan)
    if hit is not None:  # generated again from the cached IR: its header says so too
        final = final.replace(meta={**final.meta, "from_cache": True})
    final = runner.report(codegen_pass.NAME, trace, final, time.perf_counter() - t0)
    if key is not None and hit is None and runner.kept:
        from .passes.claim import DECOMPOSED
        options.cache.store(key, runner.kept, trace.meta.get(DECOMPOSED) or {}, runner.seq_base)
    return final, fn


def _from_cache(options: CompileOptions, trace: Trace, start: int, executors: list, runner: PassRunner):
    """Return (the cache key of this chain, the trace codegen runs on when the cache had it, else
    None); the key is None when this compile must not be cached (a test fault is active)."""
    from . import compile_cache, faults
    if faults.active_faults():
        return None, None
    targets = getattr(options.aot, "targets", ()) if options.aot is not None else ()
    key = options.cache.key(trace, start, executors, options.debug, targets)
    runner.seq_base = compile_cache.seq_base(trace)
    try:
        hit = compile_cache.replay(options.cache, key, runner, executors)
    except Exception as e:  # a replay that breaks is a miss: the passes run (their reports replace its)
        options.observer.runtime(trace.graph, trace.chain, "compile_cache",
                                 {"hit": False, "key": key[:16], "note": f"replay failed: {type(e).__name__}: {e}"[:300]})
        runner.index, hit = start, None
    if hit is None:
        runner.kept = []
    return key, hit
