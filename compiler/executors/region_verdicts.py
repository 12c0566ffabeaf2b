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
_LIMIT_TEMPLATES = 50_000  # member texts kept (each keeps its symbol alive); past it they start over
_templates: dict = {}  # id(symbol) -> (symbol, text, value names)
_lock = threading.Lock()
stats = {"asked": 0, "planned": 0}


def _template(b: BoundSymbol) -> tuple:
    """Return (the structural text of ``b`` with its values numbered by first appearance in ``b``
    alone, those values' names in that order), computed once per symbol object."""
    hit = _templates.get(id(b))
    if hit is not None and hit[0] is b:
        return hit[1], hit[2]
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

    def op(s: BoundSymbol) -> tuple:
        return (s.sym, s.aten, repr(map_structure(canon, s.args)), repr(map_structure(canon, s.kwargs)),
                repr(map_structure(canon, s.outputs)), tuple(op(x) for x in s.subsymbols))
    text = repr(op(b))
    with _lock:
        if len(_templates) >= _LIMIT_TEMPLATES:
            _templates.clear()
        _templates[id(b)] = (b, text, tuple(names))  # b kept alive: its id stays its own
    return text, tuple(names)


def region_key(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, phase_limit: int) -> tuple:
    """Return the structural key of a region: equal for regions that differ only in value names.

    Values are numbered by first appearance in the region (args, kwargs, outputs, subsymbols, member
    after member). A member's own text numbers them by first appearance in that member and is
    computed once per symbol (the fuse pass asks about every merge, so about each symbol many
    times); the key pairs those texts with the region numbers of each member's values, which
    distinguishes exactly the regions the region-wide numbering would."""
    names: dict[str, int] = {}
    texts, numbers = [], []
    for b in members:
        text, local = _template(b)
        texts.append(text)
        numbers.append(tuple([names.setdefault(n, len(names)) for n in local]))

    def canon(p):
        if isinstance(p, TensorProxy):
            return ("T", names.setdefault(p.name, len(names)), p.shape, p.dtype, p.strides, p.device.split(":")[0])
        return repr(p)
    return (device_kind, phase_limit, tuple(texts), tuple(numbers), tuple(canon(p) for p in outputs))


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
