"""Test-only fault injection: deliberate numerical bugs that the numerics checks must find.

Nothing here is active unless the environment variable :data:`ENV` names a fault (a comma-separated
list), which only tests set. Each fault is a one-line change of the compiler's own output, so
``thundervis bisect`` and ``run --check-numerics`` are tested against a bug they did not write:

- ``gelu_constant``: the decomposition of ``aten.gelu`` uses 0.5005 instead of 0.5.
- ``triton_sum_init``: Triton kernels start sums (and means) at 1.0 instead of 0.
"""
from __future__ import annotations

import os

ENV = "THUNDERVIS_TEST_FAULTS"
KNOWN = ("gelu_constant", "triton_sum_init")


def active_faults() -> tuple[str, ...]:
    """Return the known faults the environment turns on (normally none)."""
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    return tuple(n for n in KNOWN if n in names)


def active(name: str) -> bool:
    """Return True when fault ``name`` is turned on."""
    return name in active_faults()
