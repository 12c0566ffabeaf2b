"""The float64 reference a recorded region is checked against: the region with its floating dtype
constants raised to float64, run by the reference interpreter on its inputs raised to float64.
:mod:`thundervis.rerun`, :mod:`thundervis.numerics_check` and bisection compare kernels with it.
"""
from __future__ import annotations

from typing import Sequence

import torch

from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace, map_structure


def float64_region(trace: Trace) -> Trace:
    """Return the region with floating dtype constants (conversions) raised to float64."""
    return trace.replace(symbols=tuple(float64_symbol(b) for b in trace.symbols))


def float64_symbol(b: BoundSymbol) -> BoundSymbol:
    """Return symbol ``b`` (and its subsymbols) with floating dtype constants raised to float64."""
    return b.replace(args=map_structure(_up, b.args), kwargs=map_structure(_up, b.kwargs),
                     subsymbols=tuple(float64_symbol(s) for s in b.subsymbols))


def _up(v):
    return torch.float64 if isinstance(v, torch.dtype) and v.is_floating_point else v


def reference_outputs(trace: Trace, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Run the reference interpreter on ``inputs`` raised to float64; return flat outputs."""
    args = [t.double() if t.is_floating_point() else t for t in inputs]
    outs = run_trace(float64_region(trace), args)
    return [o for o in flat_values(outs) if isinstance(o, torch.Tensor)]


def flat_values(x):
    """Yield the leaves of ``x``, a value or nested tuples/lists of values, in order."""
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from flat_values(y)
    else:
        yield x
