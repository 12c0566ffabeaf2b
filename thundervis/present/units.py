"""Units and number formatting: every view writes times, shares and sizes through these, so one
value reads the same in the CLI, the TUI, the widget and the diagrams."""
from __future__ import annotations

from typing import Optional

# The time rule lives at the bottom of the compiler, whose trace headers print pass times too.
from thundervis.compiler.units import format_ms, format_us  # noqa: F401


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """Return ``n`` and ``word`` agreeing in number: ``1 op``, ``2 ops``, ``0 ops``; ``many`` is
    the plural when it is not ``word + "s"`` (``plural(2, "pass", "passes")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def plural_word(n: int, word: str, many: Optional[str] = None) -> str:
    """Return ``word`` in the number ``n`` asks for, without the number (``1 more reason``:
    ``f"{n} more {plural_word(n, 'reason')}"``)."""
    return word if n == 1 else (many or word + "s")


def format_share(share: Optional[float]) -> str:
    """Return a fraction (0..1) as ``12.3%`` (``-`` for None)."""
    return "-" if share is None else f"{share * 100:.1f}%"


def format_pct(pct: Optional[float]) -> str:
    """Return a percentage already scaled to 0..100 with no decimals, ``87%`` (``-`` for None):
    % of roofline, occupancy."""
    return "-" if pct is None else f"{pct:.0f}%"


def format_occupancy(occupancy: Optional[float]) -> str:
    """Return a theoretical occupancy (0..1) as ``50%`` (``?`` when unknown: ptxas gave no figure)."""
    return "?" if occupancy is None else format_pct(occupancy * 100)


def format_skew(skew: Optional[float]) -> str:
    """Return a slowest/fastest ratio as ``1.23x`` (``-`` for None)."""
    return "-" if skew is None else f"{skew:.2f}x"


def short_fingerprint(fingerprint: Optional[str]) -> str:
    """Return the prefix of a trace fingerprint that views show (8 hex digits; '' for None)."""
    return (fingerprint or "")[:8]


def format_gbps(gbps: Optional[float]) -> str:
    """Return a bandwidth in GB/s as ``123 GB/s`` (three significant digits; ``-`` for None or 0)."""
    return f"{gbps:.3g} GB/s" if gbps else "-"


def format_bytes(n: Optional[int]) -> str:
    """Return a byte count as ``12.7 KB`` / ``3.1 MB`` (decimal units, like bandwidths; ``-`` for None)."""
    if n is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def format_size(n: int) -> str:
    """Return a message or buffer size in binary units: ``512 B``, ``4.0 KiB``, ``1.5 MiB`` ..."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_roofline_us(us: Optional[float]) -> str:
    """Return a roofline time in µs with three significant digits (``0.0881``, ``69.4``; ``-`` for None)."""
    if us is None:
        return "-"
    return f"{us:.3g}" if us < 1000 else f"{us:,.0f}"


def format_error(v: Optional[float]) -> str:
    """Return a numeric error as ``1.23e-07``: ``0`` when exact, ``-`` for None."""
    if v is None:
        return "-"
    return "0" if v == 0 else f"{v:.2e}"
