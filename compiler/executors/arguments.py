"""Executors never drop arguments: the check that a generated lowering honours every argument.

A fusion executor's code generator reads some of a prim's schema arguments (``self``, ``other``,
``alpha`` ...) and computes from those. Any other argument must then have a value that changes
nothing (its schema default, or a value listed in :data:`NEUTRAL`); otherwise the executor would
silently compute something else (``torch.round(x, decimals=3)`` rounded to integers), so it refuses
the op, which then runs in torch with the reason :func:`dropped_argument` returns.

Each executor lists, per prim name, the arguments its generator honours (:data:`..triton_executor`
and :mod:`.nvfuser_lowering` keep their tables next to the code that reads them).
"""
from __future__ import annotations

from typing import Iterable, Optional

import torch

from ..resolve import UnknownSymbol, resolve_overload
from ..values import format_value

# Values of arguments that do not change the values computed, whatever the schema default is.
NEUTRAL: dict[str, tuple] = {
    "decimals": (0,),
    "layout": (None, torch.strided),
    "pin_memory": (None, False),
    "non_blocking": (False, True),  # a copy is a copy, whenever it completes
    "sparse_grad": (False,),  # the forward value of gather is the same
    "memory_format": (None, torch.preserve_format, torch.contiguous_format),
}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


def dropped_argument(executor: str, sym: str, aten: Optional[str], bound: dict,
                     honoured: Iterable[str]) -> Optional[str]:
    """Return None when every argument of ``sym`` that ``executor`` does not read (not in
    ``honoured``) has a value that changes nothing; else one sentence naming the first one.

    ``aten``: the ATen overload the symbol stands for (its schema lists the arguments);
    ``bound``: the arguments by schema name, defaults filled in.
    """
    try:
        op = resolve_overload(aten or sym)
    except UnknownSymbol:
        return None  # nothing to compare against; the caller's own checks decide
    honoured = set(honoured)
    for a in op._schema.arguments:
        if a.name in honoured or a.name not in bound:
            continue
        value = bound[a.name]
        if a.has_default_value() and _same(value, a.default_value):
            continue
        if any(_same(value, n) for n in NEUTRAL.get(a.name, ())):
            continue
        return (f"{executor} cannot honour argument {a.name}={format_value(value)} of "
                f"{op._schema.name.removeprefix('aten::')}.{op._overloadname or 'default'}, so torch runs it")
    return None


def honoured_table(groups: list[tuple[Iterable[str], Iterable[str]]]) -> dict[str, frozenset]:
    """Return {prim name: honoured argument names} from (prim names, argument names) groups; a
    name in several groups honours the union."""
    table: dict[str, set] = {}
    for names, args in groups:
        for n in names:
            table.setdefault(n, set()).update(args)
    return {n: frozenset(a) for n, a in table.items()}
