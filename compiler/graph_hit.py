"""A training graph compiled from its graph cache entry (:mod:`.graph_cache`), without AOTAutograd.

The entry's passes are replayed into the recording as the cold compile reported them (marked
``from_cache``); each chain compiles from its recorded ``remat`` trace, which finds its own chain
entry; an ``autograd.Function`` calls the compiled forward and backward with AOTAutograd's calling
convention for a plain graph: the forward returns the user outputs then the saved tensors, the
backward takes the saved tensors then one contiguous tangent per output that requires grad, and
returns one gradient per input. As on a cold compile, the backward compiles at the first backward,
and a chain whose compile or first call fails runs through the torch executor instead (reported).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from typing import Callable, Optional

import torch
import torch.fx
from torch.autograd.function import once_differentiable

from . import graph_cache
from . import remat as _remat
from .chain_wrappers import _announced, _guard_first_call
from .compile_cache import FROM_CACHE
from .heap_freeze import compiling as _gc_compiling
from .observer import CompileObserver
from .pipeline import CompileOptions, compile_chain


def cached_graph(options: CompileOptions, remat: str, capture: Optional[graph_cache.GraphCapture], graph: int,
                 gm: torch.fx.GraphModule, example_inputs, site) -> Optional[Callable]:
    """Return ``graph``'s callable from its graph entry, or None: the graph compiles through
    AOTAutograd (with ``capture`` recording what its entry needs, when the graph may have one).
    Never raises: a hit that breaks is a miss, reported."""
    from . import faults
    if capture is None or options.cache is None or faults.active_faults() or \
            (options.profile is not None and options.profile.compare_steps > 0):
        return None
    targets = getattr(options.aot, "targets", ()) if options.aot is not None else ()
    try:
        key = graph_cache.graph_key(gm, example_inputs, executors=options.executors, remat=remat,
                                    debug=options.debug, targets=targets, site=site)
        compiled = compile_from_cache(options, graph, key, len(example_inputs)) if key else None
    except Exception as e:
        options.observer.runtime(graph, "joint", "compile_cache", {
            "hit": False, "level": "graph", "note": f"graph cache replay failed: {type(e).__name__}: {e}"[:300]})
        key = compiled = None
    if compiled is graph_cache.NOT_PLAIN:  # AOTAutograd compiles it, every time; its chains have entries
        return None
    if compiled is None and key:
        capture.begin(graph, key)
    return compiled


def compile_from_cache(options: CompileOptions, graph: int, key: str, n_inputs: int):
    """Return the callable of ``graph`` built from the graph entry of ``key`` with ``options``
    (whose ``cache`` is on), :data:`.graph_cache.NOT_PLAIN` when a cold compile marked the graph
    not plain, or None on a miss (reported as a ``compile_cache`` event of the ``joint`` chain,
    with why when an entry was refused)."""
    obs = options.observer
    entry, why = graph_cache.load(options.cache.root, key)
    if entry is graph_cache.NOT_PLAIN:
        return entry
    if entry is not None and entry.meta["n_args"] != n_inputs:
        entry, why = None, f"graph cache entry {key[:12]} takes {entry.meta['n_args']} inputs, not {n_inputs}"
    if entry is None:
        obs.runtime(graph, "joint", "compile_cache", {"hit": False, "key": key[:16], "level": "graph",
                                                      **({"note": why} if why else {})})
        return None
    if entry.meta["kind"] == "inference":
        _replay(obs, graph, entry, ("inference",))
        obs.runtime(graph, "inference", "compile_cache", {"hit": True, "key": key[:16], "level": "graph"})
        return _inference(_chain(options, graph, entry, "inference"), entry.meta)
    _replay(obs, graph, entry, ("joint", "forward"))
    obs.runtime(graph, "joint", "partition_cache", {"hit": True, "level": "graph"})
    obs.runtime(graph, "joint", "compile_cache", {"hit": True, "key": key[:16], "level": "graph"})
    forward = _chain(options, graph, entry, "forward")
    state: dict = {}

    def backward() -> Callable:
        if "fn" not in state:  # compiled at the first backward, as AOTAutograd does
            with _gc_compiling():
                _replay(obs, graph, entry, ("backward",))
                state["fn"] = _chain(options, graph, entry, "backward")
                obs.memory_ledger(graph, entry.ledger)
        return state["fn"]
    return _runtime(forward, backward, entry.meta)


def _replay(obs: CompileObserver, graph: int, entry: graph_cache.GraphEntry, chains: tuple) -> None:
    """Report the entry's passes of ``chains`` as the cold compile did, each marked from cache."""
    for chain, index, name, changed, ms, trace in entry.passes:
        if chain in chains:
            trace = trace.replace(graph=graph, meta={**trace.meta, FROM_CACHE: True, "compiled_ms": round(ms, 3)})
            obs.pass_done(graph, chain, index, name, trace, 0.0, changed)


def _chain(options: CompileOptions, graph: int, entry: graph_cache.GraphEntry, chain: str) -> Callable:
    """Compile ``chain`` from the entry's ``remat`` trace; return its boxed callable, guarded on its
    first call (the torch executor runs it when the compile or the first call fails)."""
    obs = options.observer
    start = _remat.without_notes(entry.start(chain).replace(graph=graph))
    if "duration_ms" in start.meta:  # an inference chain's acquire as reported; it compiled without it
        start = start.replace(meta={k: v for k, v in start.meta.items() if k != "duration_ms"})
    eager = _lazy_torch_only(start, options)
    t0 = time.perf_counter()
    try:
        _, fn = compile_chain(start, options)
    except Exception as e:
        obs.chain_failed(graph, chain, f"compiler error: {type(e).__name__}: {e}", traceback.format_exc())
        fn = None
    obs.runtime(graph, chain, "chain_compiled", {"seconds": time.perf_counter() - t0})
    if fn is None:
        return _announced(eager, graph, chain)

    def report(e: BaseException):
        obs.chain_failed(graph, chain, f"runtime error: {type(e).__name__}: {e}", traceback.format_exc())
    return _announced(_guard_first_call(fn, eager, report), graph, chain)


def _lazy_torch_only(trace, options: CompileOptions) -> Callable:
    """Return a boxed callable that runs ``trace`` through the torch executor alone, compiled at
    its first call (only a failure needs it), reporting to no one."""
    quiet = dataclasses.replace(options, executors=["torch"], observer=CompileObserver(), profile=None,
                                aot=None, cache=None)
    built: list = []

    def run(args):
        if not built:
            built.append(compile_chain(trace, quiet)[1])
        return built[0](args)
    run._boxed_call = True
    return run


def _inference(fn: Callable, meta: dict) -> Callable:
    """Return an inference graph's callable: boxed ``fn`` called as AOTAutograd calls it."""
    no_amp = torch._C._DisableAutocast if meta["disable_amp"] else contextlib.nullcontext

    def run(*args):
        with no_amp():
            return list(fn(list(args)))
    return run


def _runtime(forward: Callable, backward: Callable[[], Callable], meta: dict) -> Callable:
    """Return the graph's callable: an ``autograd.Function`` over the boxed ``forward`` and the
    backward ``backward()`` returns, with ``meta``'s calling convention (module doc)."""
    n_returns, required = meta["n_returns"], meta["out_requires_grad"]
    no_amp = torch._C._DisableAutocast if meta["disable_amp"] else contextlib.nullcontext

    class CachedGraph(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            with no_amp():
                outs = forward(list(args))
            returns, saved = list(outs[:n_returns]), outs[n_returns:]
            # a view saved as is would keep its base's autograd history (as AOTAutograd detaches it)
            ctx.save_for_backward(*[s.detach() if s._is_view() else s for s in saved])
            fixed = [o for o, r in zip(returns, required) if not r and isinstance(o, torch.Tensor)]
            if fixed:
                ctx.mark_non_differentiable(*fixed)
            return tuple(returns)

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            tangents = [g if g.is_contiguous() else g.contiguous() for g, r in zip(grads, required) if r]
            args = [*ctx.saved_tensors, *tangents]
            fn = backward()
            with no_amp():
                return tuple(fn(args))

    def run(*args):
        return list(CachedGraph.apply(*args))
    return run
