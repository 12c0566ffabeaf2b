"""Communication ops: the collectives distributed training puts in graphs, and their waits.

FSDP2 (``fully_shard``), DTensor and ``torch.distributed._functional_collectives`` trace into the
graph as functional collectives (``_c10d_functional.all_reduce.default``,
``_c10d_functional.all_gather_into_tensor.default``, ``_c10d_functional.reduce_scatter_tensor``
...) each followed, where its result is read, by ``_c10d_functional.wait_tensor.default``. The
compiler treats them as opaque and ordered:

- claimed by the torch executor (never lowered, decomposed or fused), with the reason noted;
- never merged by CSE nor dropped by DCE (every rank must issue the same collectives in the same
  order, or the job hangs);
- barriers for fusion: a fusion region never holds ops from both sides of a communication op, so
  fusing never moves computation across a collective or its wait (the overlap of communication
  with the computation placed between a collective and its wait is kept as traced).

Torch-free: views use :func:`is_communication` on recorded symbol names.
"""
from __future__ import annotations

# Operator namespaces whose ops talk to other ranks.
COMMUNICATION_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "c10d"})
WAIT_OPS = frozenset({"wait_tensor"})

CLAIM_NOTE = "communication op: runs on torch as an opaque collective, never fused across"


def is_communication(sym: str) -> bool:
    """Return True when the symbol name ``sym`` (``_c10d_functional.all_reduce.default``) is a
    collective or a wait on one."""
    ns, _, rest = sym.partition(".")
    return bool(rest) and ns in COMMUNICATION_NAMESPACES


def is_wait(sym: str) -> bool:
    """Return True when ``sym`` waits for a collective's result (``wait_tensor``)."""
    return is_communication(sym) and sym.split(".")[1] in WAIT_OPS


def communication_kind(sym: str) -> str:
    """Return the op's short name (``all_reduce``, ``wait_tensor`` ...) of a communication symbol."""
    parts = sym.split(".")
    return parts[1] if len(parts) > 1 else sym
