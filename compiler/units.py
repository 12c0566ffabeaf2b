"""Time as text: the one rule every view (through :mod:`thundervis.present.units`) and the trace
printer's headers use, so a pass time reads the same everywhere. Imports nothing of the project."""
from __future__ import annotations

from typing import Optional


def format_us(us: Optional[float]) -> str:
    """Return a time given in microseconds as text: ``12.3 µs`` below 1 ms, ``1.23 ms`` below 1 s,
    ``1.23 s`` above; ``-`` for None."""
    if us is None:
        return "-"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def format_ms(ms: Optional[float]) -> str:
    """Return a time given in milliseconds as text (the rule of :func:`format_us`)."""
    return "-" if ms is None else format_us(ms * 1e3)
