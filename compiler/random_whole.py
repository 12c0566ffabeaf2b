"""Random ATen ops that stay whole, so a seeded run draws eager's random numbers.

PyTorch's decompositions rewrite ``native_dropout`` and ``bernoulli`` as ``rand_like(x) < p``: the
same distribution, but not the same draws. Eager's CPU kernels draw with ``bernoulli_`` (for
dropout, ``F.dropout`` runs ``bernoulli_(1 - p)`` on a float mask; ``native_dropout`` does the same),
a different use of the generator than ``rand_like``, so with one seed the masks differ (Inductor's
``config.fallback_random`` keeps these ops as ATen calls for the same reason). Kept whole, the torch
executor calls eager's own kernel with eager's generator, so the forward mask, and the backward
that reads it, are eager's. Ops whose decompositions end in one of these (``alpha_dropout`` ...)
stay whole too, since the table no longer decomposes what they call.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

# Why each op stays whole: the fallback note a trace shows next to it.
REASON = "its random draws stay whole with torch: eager's kernel and generator, so a seeded run gets eager's numbers"


def _overloads(packet) -> list:
    """Return every overload of an ATen op packet (the ones this torch build has)."""
    return [getattr(packet, name) for name in packet.overloads()]


# native_dropout: eager's F.dropout / nn.Dropout in training; bernoulli: torch.bernoulli and what
# functionalization makes of bernoulli_ (the draws of F.dropout itself, alpha_dropout ...).
RANDOM_WHOLE = frozenset(_overloads(aten.native_dropout) + _overloads(aten.bernoulli)
                         + _overloads(aten.bernoulli_))


def is_random_whole(op) -> bool:
    """Return whether ATen overload ``op`` must run whole (not decomposed) to keep eager's draws."""
    return op in RANDOM_WHOLE
