"""Whether a region generates, asked once per distinct region (repeated layers fold here).

The fuse pass asks the Triton executor, for every candidate region, whether one kernel can be
generated for it; answering means planning the whole kernel. The 32 or 80 decoder layers of a
Llama ask the same questions about regions that differ only in their value names, so the answer is
kept under a key of the region's structure: its ops, the values named by first appearance, their
shapes, dtypes and strides, the device kind and the phase limit. On Llama-3 this is most of the
fuse pass's time, and it now grows with the distinct blocks, not with the layers.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

from ..ir import BoundSymbol, TensorProxy, map_structure

_LIMIT = 200_000  # keys kept; past it the memo starts over (a key is a few hundred bytes)
_memo: dict = {}
_lock = threading.Lock()
stats = {"asked": 0, "planned": 0}


def region_key(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, phase_limit: int) -> tuple:
    """Return the structural key of a region: equal for regions that differ only in value names."""
    names: dict[str, int] = {}

    def canon(v):
        if isinstance(v, TensorProxy):
            n = names.setdefault(v.name, len(names))
            return ("T", n, v.shape, v.dtype, v.strides, v.device.split(":")[0])
        if isinstance(v, float) and v != v:
            return "nan"
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        return repr(v)

    def op(b: BoundSymbol) -> tuple:
        return (b.sym, b.aten, repr(map_structure(canon, b.args)), repr(map_structure(canon, b.kwargs)),
                repr(map_structure(canon, b.outputs)), tuple(op(s) for s in b.subsymbols))
    ops = tuple(op(b) for b in members)
    return (device_kind, phase_limit, ops, tuple(canon(p) for p in outputs))


def verdict(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, phase_limit: int,
            plan: Callable[[], Optional[str]]) -> Optional[str]:
    """Return ``plan()`` (None: the region generates; else why not), planned once per region key."""
    from .. import faults
    if faults.active_faults():  # a test fault changes what generates: never share its answers
        return plan()
    key = region_key(members, outputs, device_kind, phase_limit)
    with _lock:
        stats["asked"] += 1
        if key in _memo:
            return _memo[key]
    answer = plan()
    with _lock:
        stats["planned"] += 1
        if len(_memo) >= _LIMIT:
            _memo.clear()
        _memo[key] = answer
    return answer
