"""The labels of a group's trace variants (ranks whose traces differ): one scheme everywhere.

A variant is named by a letter, ``A`` for the variant of the lowest rank, ``B`` for the next ...,
and by an 8-character fingerprint prefix past ``Z``. The TUI's rank picker, the widget and ``ls``
of a group folder all show these labels.
"""
from __future__ import annotations

import string
from typing import Iterable, Optional

from .units import short_fingerprint


def variant_labels(variants: dict) -> dict:
    """Return ``{fingerprint: label}`` for ``variants`` (fingerprint -> ranks), labels as the module
    docstring says, in the order of each variant's lowest rank."""
    order = sorted(variants, key=lambda fp: (min(variants[fp]) if variants[fp] else 0, fp))
    letters = string.ascii_uppercase
    return {fp: letters[i] if i < len(letters) else short_fingerprint(fp) for i, fp in enumerate(order)}


def first_rank_of(ranks: Iterable[int]) -> Optional[int]:
    """Return the rank that stands for a variant (its ranks ``ranks``): the lowest, which the
    rank comparison diffs, ``ls`` points to (``= rank N``) and the views open (None for none)."""
    ranks = list(ranks)
    return min(ranks) if ranks else None
