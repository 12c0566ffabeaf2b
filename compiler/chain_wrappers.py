"""The wrappers around a compiled chain that AOTAutograd calls: boxed eager fallbacks, call
announcements, the first-call guard, copies of saved inputs AOTAutograd mutates, the forward's
metadata fixes, and the flattening of compiled autograd's boxed list input. Moved out of backend.py,
which composes them."""
from __future__ import annotations

import contextlib
from typing import Callable, Optional, Sequence

import torch
import torch.fx

from . import chain_calls
from .observer import backend_loaded
from .profiling import ProfiledChain


def _eager_boxed(gm: torch.fx.GraphModule) -> Callable:
    def run(args):
        out = gm(*args)
        args.clear()
        return out
    run._boxed_call = True
    return run


def _announced(fn: Callable, graph: int, chain: str) -> Callable:
    """Return boxed ``fn`` telling :mod:`.chain_calls` when each of its calls starts and ends
    (``fn.state`` of :func:`_guard_first_call`, if any, stays readable on the result)."""
    def run(args):
        chain_calls.started(graph, chain)
        try:
            return fn(args)
        finally:
            chain_calls.finished(graph, chain)
    run._boxed_call = True
    if hasattr(fn, "state"):
        run.state = fn.state
    return run


def _tracing_context(fresh: bool):
    """A tracing context of its own for a compile outside Dynamo's (a shape's first call), where
    AOTAutograd leaves its metadata (:func:`_mutated_inputs_saved` reads it); else no-op."""
    if not fresh or torch._guards.TracingContext.try_get() is not None:
        return contextlib.nullcontext()
    return torch._guards.tracing(torch._guards.TracingContext(None))


def _mutated_inputs_saved(gm: torch.fx.GraphModule) -> list[int]:
    """Return the positions among forward graph ``gm``'s outputs of the tensors saved for backward
    that are inputs AOTAutograd mutates after the forward returns (BatchNorm's running statistics,
    which a checkpointed region saves to recompute from). Empty when AOTAutograd's metadata is not
    there or does not line up with the graph."""
    try:
        meta = torch._guards.TracingContext.try_get().fw_metadata
        mutated = {i for i, info in enumerate(meta.input_info) if info.mutates_data}
        first_saved = int(meta.num_forward_returns)
    except Exception:
        return []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if not mutated or len(placeholders) != len(meta.input_info):
        return []
    index = {n: i for i, n in enumerate(placeholders)}
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return [j for j, o in enumerate(outputs)
            if j >= first_saved and isinstance(o, torch.fx.Node) and index.get(o) in mutated]


def _no_donated_buffers() -> None:
    """Tell AOTAutograd (through the forward's metadata) that the backward reuses none of the
    tensors the forward saved for it: none is written, the generated code only drops its references.
    With the donated buffers AOTAutograd finds otherwise (buffers Inductor may overwrite), a
    ``backward(retain_graph=True)`` after the backward was compiled is refused ("compiled with
    non-empty donated buffers"), and a training loop that keeps its graph would stop."""
    try:
        meta = torch._guards.TracingContext.try_get().fw_metadata
        if meta.bw_donated_idxs:
            meta.bw_donated_idxs = []
    except Exception:  # no tracing context, or a torch without donated buffers
        pass


def _saving_copies(fn: Callable, positions: Sequence[int]) -> Callable:
    """Return boxed ``fn`` whose outputs at ``positions`` are copies: a tensor saved for backward
    must keep the value it had in the forward, and AOTAutograd writes the input's new value into
    the input itself after the forward returns (autograd would then refuse the saved tensor, its
    version having moved)."""
    if not positions:
        return fn

    def run(args):
        out = list(fn(args))
        for j in positions:
            if isinstance(out[j], torch.Tensor):
                out[j] = out[j].clone()
        return out
    run._boxed_call = True
    if hasattr(fn, "state"):
        run.state = fn.state
    return run


def _guard_first_call(fn: Callable, eager: Callable, report: Callable[[BaseException], None]) -> Callable:
    """Return a boxed callable that runs ``fn``; if its first call raises, report it and switch to
    ``eager`` for good (the functional graph has no side effects to undo). When ``fn`` is a
    :class:`ProfiledChain`, its plain callable replaces it once profiling is done; ``run.state``
    shows which callable runs now."""
    state = {"fn": fn, "checked": False}
    if isinstance(fn, ProfiledChain):
        def profiling_done():
            if state["fn"] is fn:
                state["fn"] = fn.plain
        fn.on_done = profiling_done

    def run(args):
        if state["checked"]:
            return state["fn"](args)
        saved = list(args)
        try:
            out = fn(args)
        except Exception as e:  # a kernel that fails at run time must not stop training
            report(e)
            state["fn"] = eager
            state["checked"] = True
            return eager(saved)
        state["checked"] = True
        return out
    run._boxed_call = True
    run.state = state
    return run


def _flatten_boxed_inputs(gm: torch.fx.GraphModule, example_inputs) -> Optional[torch.fx.GraphModule]:
    """Return a copy of ``gm`` whose first input, a list of tensors read only by ``list[i]``
    (compiled autograd's graphs: DDP's python reducer traces its all-reduces there), is one input
    per tensor; None when the graph uses the list any other way."""
    import operator
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__() if hasattr(gm.graph, "__deepcopy__") else gm.graph)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    boxed, items = placeholders[0], example_inputs[0]
    if not all(isinstance(t, torch.Tensor) for t in items):
        return None
    users = list(boxed.users)
    if not all(u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
               and 0 <= u.args[1] < len(items) for u in users):
        return None
    with gm.graph.inserting_before(boxed):
        new = [gm.graph.placeholder(f"{boxed.name}_{i}") for i in range(len(items))]
    for node, value in zip(new, items):
        node.meta["example_value"] = node.meta["val"] = value
    for u in users:
        u.replace_all_uses_with(new[u.args[1]])
        gm.graph.erase_node(u)
    gm.graph.erase_node(boxed)
    gm.recompile()
    return gm


# Only the backend imports this module: the backend is loading (torch.compile looked it up), so
# the session's graph-break watcher starts listening before Dynamo traces the first frame.
backend_loaded()
