"""The ops a run left to torch, grouped by reason: the one rule ``ls`` and ``thundervis run``'s
closing summary show them by.

Reasons that differ only in their size lists are one reason: a graph recompiled for each batch
size repeats every reason with its own shapes. A group's reason keeps each size list that is the
same in all of them and writes the others as ``[…]``. Recorded strings are returned as recorded:
make them terminal-safe before printing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

from .kernel_rows import group_sources
from .source_view import op_name

# A list of sizes or dims in a reason ("of a [16, 7, 32] tensor", "dims [1]").
_SIZE_LIST = re.compile(r"\[\d+(?:, \d+)*\]")


@dataclass(frozen=True)
class OpGroup:
    """Ops torch runs for one reason: ``reason`` (see the module doc), ``count`` (ops),
    ``ops`` (their distinct op names, sorted) and ``sources`` (their source lines grouped per file,
    at most six line numbers; "" when none is known)."""

    reason: str
    count: int
    ops: tuple[str, ...]
    sources: str

    def as_json(self) -> dict:
        """Return ``{"reason", "count", "ops", "sources"}``."""
        return {"reason": self.reason, "count": self.count, "ops": list(self.ops), "sources": self.sources}


def _common_sizes(reasons: list) -> str:
    """Return the reason of a group (texts equal but for their size lists): each size list that is
    the same in all of them as it is, the others as ``[…]``."""
    lists = [_SIZE_LIST.findall(r) for r in reasons]
    parts = iter([ls[0] if len(set(ls)) == 1 else "[…]" for ls in zip(*lists)])
    return _SIZE_LIST.sub(lambda m: next(parts), reasons[0])


def torch_op_groups(ops: Iterable[tuple[str, str, Optional[str]]]) -> list[OpGroup]:
    """Return the :class:`OpGroup` of each reason among ``ops`` (``(what, reason, source)`` of each
    op left to torch: ``present.status.Fallback`` of kind ``torch op``), the largest group first,
    then by reason."""
    groups: dict[str, list] = {}
    for what, reason, source in ops:
        groups.setdefault(_SIZE_LIST.sub("[…]", reason), []).append((what, reason, source))
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [OpGroup(_common_sizes([r for _, r, _ in items]), len(items),
                    tuple(sorted({op_name(w) for w, _, _ in items})),
                    group_sources([s for _, _, s in items if s], limit=6))
            for _, items in ordered]
