"""A profiled chain's time per call, as one line: the wall time of its untimed calls against the
time inside its kernels and torch ops, so the host-side cost between them (the generated code's
Python, allocation; on CUDA the launches and the synchronization) reads as a share.

The two medians come from different calls (``run --profile`` times symbols in K calls, then the
whole call in the K after them, see docs/profiling.md), so on a noisy machine the share inside can
exceed 100%; it is shown as measured, with the words that it means nothing measurable between them
(up to :data:`NOISE`), or that the timed calls were slower than the untimed ones (beyond it: first
calls among them, which a larger ``--warmup`` leaves out).
"""
from __future__ import annotations

from typing import Optional

from thundervis.present.units import format_us

# Past 100% up to this, the share inside is noise between different calls (on a chain of tens of µs the
# clocks around each symbol alone add ~10%); beyond it the timed calls were unlike the untimed ones (a
# first call that compiles or measures its CPU paths, with --warmup 0: 5-25x on the model zoo).
NOISE = 1.5

# What the time inside the symbols is, per clock: device time on CUDA, host time without.
_INSIDE = {"device": "kernels and torch ops on the device", "host": "kernels and torch ops"}


def chain_time_text(ct) -> Optional[str]:
    """Return the line ``ls`` prints under a timed chain (a ``recording.model.ChainTiming``):
    ``1.92 ms a call (wall, median of 5 untimed calls) · kernels and torch ops 1.55 ms (81%)``;
    without wall times (the run ended first, or an older recording), the time inside alone; None
    when the chain was not timed."""
    if ct is None or ct.calls <= 0:
        return None
    inside = f"{_INSIDE.get(ct.clock, 'kernels and torch ops')} {format_us(ct.median_us)}"
    partial = " (the run ended first)" if ct.partial else ""
    wall = ct.wall_median_us
    if wall is None:
        return (f"{inside} a call (median of {ct.calls} timed call{'' if ct.calls == 1 else 's'})"
                f"{partial} · wall time not recorded")
    n = len(ct.untimed_walls_us)
    share = ""
    if wall > 0:
        ratio = ct.median_us / wall
        if ratio <= 1.0:
            share = f" ({ratio:.0%})"
        elif ratio <= NOISE:  # different calls: a little past 100% is noise around "all of it"
            share = f" ({ratio:.0%}: nothing measurable between them)"
        else:  # the timed calls were not like the untimed ones: first calls (compiling, measuring)
            share = f" ({ratio:.0%}: the timed calls ran slower than the untimed ones; more --warmup calls time steadier ones)"
    synced = ", synchronized" if ct.clock == "device" else ""
    return (f"{format_us(wall)} a call (wall, median of {n} untimed call{'' if n == 1 else 's'}{synced})"
            f" · {inside}{share}{partial}")
