"""Trace checking for the debug mode: names defined before use, unique definitions, and metadata
re-inferred on fake tensors matching what the trace claims."""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from .ir import BoundSymbol, Trace, TensorProxy, flatten, map_structure
from .resolve import UnknownSymbol, resolve_overload, resolve_symbol
from .values import contiguous_strides, is_valid_name, proxy_for, torch_dtype


class TraceCheckError(Exception):
    """A trace broke an invariant; the message names the symbol and the rule."""


def check_names(trace: Trace) -> None:
    """Raise TraceCheckError unless every proxy is defined once, before it is read."""
    defined: set[str] = set()
    for p in trace.inputs:
        if not is_valid_name(p.name):
            raise TraceCheckError(f"input name {p.name!r} is not an identifier")
        defined.add(p.name)
    deleted: set[str] = set()

    def visit(b: BoundSymbol, top: bool):
        for p in b.flat_inputs():
            if p.name not in defined:
                raise TraceCheckError(f"{b.uid} ({b.sym}) reads {p.name} before it is defined")
            if p.name in deleted:
                raise TraceCheckError(f"{b.uid} ({b.sym}) reads {p.name} after it was deleted")
        if b.sym == "del":
            deleted.update(p.name for p in b.args)
            return
        for s in b.subsymbols:
            visit(s, False)
        for p in b.flat_outputs():
            if p.name in defined and top and not b.subsymbols:
                raise TraceCheckError(f"{b.uid} ({b.sym}) redefines {p.name}")
            defined.add(p.name)

    for b in trace.symbols:
        visit(b, True)
    for p in trace.flat_outputs():
        if p.name not in defined:
            raise TraceCheckError(f"output {p.name} is never defined")


def check_metadata(trace: Trace) -> None:
    """Raise TraceCheckError when re-running each top-level op on fake tensors gives other shapes
    or dtypes than the trace records."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    env: dict = {}
    with unset_fake_temporarily(), mode:
        for p in trace.inputs:
            env[p.name] = torch.empty_strided(p.shape, p.strides or contiguous_strides(p.shape), dtype=torch_dtype(p.dtype), device=p.device)
        for b in trace.symbols:
            if b.sym == "del":
                continue
            try:
                fn = resolve_overload(b.aten) if b.aten else resolve_symbol(b.sym)
            except UnknownSymbol:
                fn = None
            outs = b.flat_outputs()
            if fn is None or not b.sym.startswith(("aten.", "prims.")):
                for p in outs:
                    env[p.name] = torch.empty_strided(p.shape, p.strides or contiguous_strides(p.shape), dtype=torch_dtype(p.dtype), device=p.device)
                continue
            read = lambda x: map_structure(lambda v: env[v.name] if isinstance(v, TensorProxy) else v, x)  # noqa: E731
            try:
                res = fn(*read(b.args), **read(b.kwargs))
            except Exception as e:
                raise TraceCheckError(f"{b.uid} ({b.sym}) fails on its recorded inputs: {e}") from None
            got = [r for r in flatten(res if isinstance(res, (tuple, list)) else (res,)) if isinstance(r, torch.Tensor)]
            for p, r in zip(outs, got):
                q = proxy_for(p.name, r)
                if q.shape != p.shape or q.dtype != p.dtype:
                    raise TraceCheckError(f"{b.uid} ({b.sym}): {p.name} is recorded as {p.short()} but computes {q.short()}")
                env[p.name] = r


def check_fusions(trace: Trace) -> None:
    """Check the fusion flag: only top-level symbols with members and an executor carry it."""
    for b in trace.symbols:
        if b.fusion and not (b.subsymbols and b.executor):
            raise TraceCheckError(f"{b.uid} ({b.sym}) is marked a fusion but has no members or no executor")
        for s in b.subsymbols:
            if any(x.fusion for x in _walk(s)):
                raise TraceCheckError(f"{b.uid} ({b.sym}) holds a fusion among its subsymbols")


def _walk(b: BoundSymbol):
    yield b
    for s in b.subsymbols:
        yield from _walk(s)


def check_trace(trace: Trace) -> None:
    """Run every check on ``trace``; raise TraceCheckError on the first broken rule."""
    check_names(trace)
    check_fusions(trace)
    check_metadata(trace)
