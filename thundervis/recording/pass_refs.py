"""Naming a pass in reader calls: a :class:`~.model.PassRef`, a :class:`~.model.PassInfo`, or
graph, chain and index."""
from __future__ import annotations

from typing import Optional, Union

from .model import PassInfo, PassRef

PassLike = Union[PassRef, PassInfo, int]


def _pass_key(ref: PassLike, chain: Optional[str], index: Optional[int]) -> PassRef:
    """Accept a PassRef, a PassInfo, or (graph, chain, index)."""
    if isinstance(ref, PassRef):
        return ref
    if isinstance(ref, PassInfo):
        return ref.ref
    if chain is None or index is None:
        raise TypeError("give a PassRef, or graph, chain and index")
    return PassRef(int(ref), chain, int(index))
