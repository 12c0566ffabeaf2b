"""The always-on check of a decomposition: its prims must produce exactly what the ATen op is
recorded with.

A decomposition is traced once per operator and argument metadata (:mod:`.decompositions`); its
outputs are then bound, in order, to the output proxies the ATen op was recorded with. PyTorch's
decompositions do not always return what the op returns: ``_scaled_dot_product_flash_attention_for_cpu``
returns the attention weights ``[B, H, T, T]`` where the op returns its logsumexp ``[B, H, T]``.
Binding such a value to the recorded proxy would give a trace whose names lie about their values,
and a wrong result at run time. :func:`output_mismatch` compares, output by output, count, shape,
dtype, device and strides (where the recording knows them and they are a dense layout, ignoring
dims of size 1 whose stride means nothing); a mismatch makes the op stay whole, run by the torch executor, with the reason in
its note.

The check reads only metadata the tracing already produced, so it costs a few comparisons per op;
:data:`STATS` counts its calls and seconds (``benchmarks/compile_time.py`` prints its share).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Optional, Sequence

from .ir import TensorProxy, short_dtype
from .values import is_dense


@dataclass
class CheckStats:
    """Calls of :func:`output_mismatch`, the seconds the whole check took (:func:`timed`), and how
    many calls found a mismatch."""

    calls: int = 0
    seconds: float = 0.0
    refused: int = 0

    def reset(self) -> None:
        """Set every counter back to zero."""
        self.calls, self.seconds, self.refused = 0, 0.0, 0


STATS = CheckStats()


def _describe(shape, dtype: str, device: str) -> str:
    return f"{device} {short_dtype(dtype)}[{', '.join(str(int(s)) for s in shape)}]"


def layout_differs(shape, recorded: Optional[Sequence[int]], computed: Optional[Sequence[int]]) -> bool:
    """Return True when ``computed`` strides of a tensor of ``shape`` address its elements otherwise
    than the ``recorded`` ones. Unknown strides never differ; dims of size 1 and empty tensors are
    ignored; so are recorded strides that are not dense: the op returned a view into another
    tensor's storage, which a trace (functional: every op makes a new tensor) never reproduces and
    whose values it computes all the same."""
    if recorded is None or computed is None or len(recorded) != len(computed):
        return False
    if any(int(s) == 0 for s in shape) or not is_dense(shape, recorded):
        return False
    return any(int(s) > 1 and int(x) != int(y) for s, x, y in zip(shape, recorded, computed))


def outputs_to_restride(recorded: Sequence, computed: Sequence) -> list[int]:
    """Return the indices of the outputs whose values match but whose layout differs from the
    recorded dense layout: the decomposition can end them with a copy into that layout."""
    out = []
    for i, (want, got) in enumerate(zip(recorded, computed)):
        if isinstance(want, TensorProxy) and got is not None and layout_differs(want.shape, want.strides, got[3]):
            out.append(i)
    return out


def output_mismatch(recorded: Sequence, computed: Sequence, strides: bool = True) -> Optional[str]:
    """Return None when each computed output matches the recorded one, else one sentence saying
    which output differs and how.

    ``recorded``: the op's flat outputs (TensorProxy, or anything else for a non-tensor output);
    ``computed``: per output, what the decomposition produces: a tuple ``(shape, dtype name, device,
    strides or None)`` for a tensor, None for a non-tensor. ``strides=False`` leaves layouts to the
    caller (see :func:`outputs_to_restride`).
    """
    STATS.calls += 1
    problem = _mismatch(recorded, computed, strides)
    if problem is not None:
        STATS.refused += 1
    return problem


@contextlib.contextmanager
def timed():
    """Add the time the ``with`` body takes to :data:`STATS` (wrap the whole check with it)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        STATS.seconds += time.perf_counter() - t0


def _mismatch(recorded: Sequence, computed: Sequence, check_strides: bool = True) -> Optional[str]:
    if len(recorded) != len(computed):
        return (f"its decomposition returns {len(computed)} outputs where the op is recorded with "
                f"{len(recorded)}")
    for i, (want, got) in enumerate(zip(recorded, computed)):
        if not isinstance(want, TensorProxy):
            continue
        if got is None:
            return f"its decomposition returns a non-tensor as output {i} ({want.name})"
        shape, dtype, device, strides = got
        shape = tuple(int(s) for s in shape)
        if shape != tuple(want.shape) or dtype != want.dtype or device != want.device:
            return (f"its decomposition computes output {i} ({want.name}) as {_describe(shape, dtype, device)} "
                    f"where the op is recorded with {want.short()}")
        if check_strides and layout_differs(shape, want.strides, strides):
            return (f"its decomposition computes output {i} ({want.name}) with strides {tuple(strides)} "
                    f"where the op is recorded with {tuple(want.strides)}")
    return None
