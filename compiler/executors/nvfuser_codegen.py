"""nvFuser code generation: one fusion region of prims -> a FusionDefinition program as Python text.

The program is generated from the validated in-memory region (a fusion :class:`BoundSymbol` whose
subsymbols are prims), never from text read back from a recording. It is a function
``def <fusion name>(fd):`` written against the API that both nvFuser Python frontends share
(``nvfuser_direct`` and the older ``nvfuser``): ``fd.define_tensor``, ``fd.define_scalar``,
``fd.ops.*`` and ``fd.add_output``, with ``DataType`` as the only other free name. Each prim is
lowered by :mod:`.nvfuser_lowering` (which spells out ATen's broadcasting, type promotion and
reduction rules) under a comment that shows the prim, so the text reads side by side with the trace.
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any, Optional

from ..ir import BoundSymbol, TensorProxy, flatten
from ..printer import call_text, comment_text
from ..values import contiguous_strides
from .nvfuser_lowering import (DATATYPE, NvFuserLoweringError, _Generator, lowering_problem,  # noqa: F401
                               bind_arguments, overload_of)


def _tensors(x) -> list[TensorProxy]:
    return [p for p in flatten(x) if isinstance(p, TensorProxy)]


# Tensor descriptors


def tensor_descriptor(shape, strides) -> tuple[list[int], list[Optional[bool]], list[int]]:
    """Return nvFuser's (symbolic shape, contiguity, stride_order) for a tensor's shape and strides.

    Symbolic shape: size-1 dims are static 1 (nvFuser specializes them as broadcast dims), the rest
    -1. ``stride_order[i]`` ranks dim ``i`` from the innermost (0). ``contiguity`` lists, outermost
    allocation dim first, True/False for dims that are (not) dense with respect to the next inner
    non-broadcast dim, and None for broadcast dims (size 1 or stride 0): nvFuser's convention.
    """
    shape = [int(s) for s in shape]
    strides = [int(s) for s in (strides if strides is not None else contiguous_strides(shape))]
    n = len(shape)
    sym = [1 if s == 1 else -1 for s in shape]
    # Non-broadcast-stride dims sorted by decreasing stride (stable), stride-0 dims kept in place.
    order = sorted((i for i in range(n) if strides[i] != 0), key=lambda i: -strides[i])
    for i in range(n):
        if strides[i] == 0:
            order.insert(i, i)
    broadcast = [strides[d] == 0 or shape[d] == 1 for d in order]
    contiguity: list[Optional[bool]] = [None] * n
    stride_order = [0] * n
    for pos, d in enumerate(order):
        stride_order[d] = n - 1 - pos
        if broadcast[pos]:
            continue
        expected = 1
        for nxt in range(pos + 1, n):
            if not broadcast[nxt]:
                expected = strides[order[nxt]] * shape[order[nxt]]
                break
        contiguity[pos] = strides[d] == expected
    return sym, contiguity, stride_order



# ---------------------------------------------------------------------------------------------------
# The program


@dataclass(frozen=True)
class FusionProgram:
    """A generated definition: its function name, source text, the region's tensor inputs and
    outputs (in ``define_tensor`` / ``add_output`` order) and the nvFuser ops it uses."""

    name: str
    source: str
    inputs: tuple[TensorProxy, ...]
    outputs: tuple[TensorProxy, ...]
    ops: tuple[str, ...]


def region_inputs(fusion: BoundSymbol) -> tuple[TensorProxy, ...]:
    """Return the fusion's tensor inputs, deduplicated, in argument order."""
    return tuple(dict.fromkeys(_tensors((fusion.args, tuple(fusion.kwargs.values())))))


def region_outputs(fusion: BoundSymbol) -> tuple[TensorProxy, ...]:
    """Return the fusion's tensor outputs in order (duplicates kept)."""
    return tuple(fusion.flat_outputs())


def generate_definition(fusion: BoundSymbol, input_strides: Optional[dict] = None) -> FusionProgram:
    """Return the FusionDefinition program for ``fusion`` (a symbol whose subsymbols are prims).

    ``input_strides`` (proxy name -> strides) overrides the recorded strides of inputs, for a
    definition specialized to the tensors actually passed. Raises NvFuserLoweringError.
    """
    if not fusion.sym.isidentifier() or keyword.iskeyword(fusion.sym):
        raise NvFuserLoweringError(f"fusion name {fusion.sym!r} is not an identifier")
    inputs = region_inputs(fusion)
    outputs = region_outputs(fusion)
    names = {p.name for p in inputs + outputs}
    for s in fusion.subsymbols:
        names.update(p.name for p in s.flat_inputs() + s.flat_outputs())
    g = _Generator(names)
    body: list[str] = []
    for p in inputs:
        strides = (input_strides or {}).get(p.name)
        g.define_input(p, tensor_descriptor(p.shape, strides if strides is not None else p.strides))
    body.extend(g.lines)
    for s in fusion.subsymbols:
        problem = lowering_problem(s) if s.sym.startswith("prims.") else f"{s.sym} is not a prim"
        if problem is not None:
            raise NvFuserLoweringError(f"{s.uid}: {problem}")
        g.lines = []
        g.lower(s)
        body.append(f"# {comment_text(call_text(s))}")
        body.extend(g.lines)
    g.lines = []
    added: set[str] = set()
    for p in outputs:
        if p.name in added:
            continue
        added.add(p.name)
        v = g.value(p)
        if p in inputs:  # an input passed through: nvFuser outputs must be computed values
            v = g.temp(f"{v.var}_out", f"fd.ops.set({v.var})", v.shape, v.dtype, "set")
        g.lines.append(f"fd.add_output({v.var})")
    body.extend(g.lines)
    header = [
        f"# nvFuser FusionDefinition for {fusion.sym}, generated by thundervis from the in-memory trace.",
        "# Runs with either frontend: `from nvfuser_direct import FusionDefinition, DataType` (or nvfuser),",
        f"# then `with FusionDefinition() as fd: {fusion.sym}(fd)` and `fd.execute([...inputs])`.",
    ]
    if inputs:
        header.append("# inputs:  " + comment_text("  ".join(f"{p.name}: {p.short()}" for p in inputs)))
    header.append("# outputs: " + comment_text("  ".join(f"{p.name}: {p.short()}" for p in outputs)))
    source = "\n".join(header + [f"def {fusion.sym}(fd):"] + ["    " + line for line in body]) + "\n"
    return FusionProgram(fusion.sym, source, inputs, outputs, tuple(g.ops))


def load_definition(program: FusionProgram, namespace: dict[str, Any]):
    """Execute the generated program (from :func:`generate_definition`, never from stored text)
    in a fresh namespace holding ``DataType`` (and ``FusionDefinition``) and return its function."""
    ns = dict(namespace)
    ns["__builtins__"] = {"float": float}
    exec(compile(program.source, f"<nvfuser definition {program.name}>", "exec"), ns)
    return ns[program.name]
