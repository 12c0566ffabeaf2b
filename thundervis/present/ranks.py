"""The ranks of a group and the one a view opens on: the one rule for ``show``/``ls``/``dot`` on a
group folder without ``--rank``, the TUI (``thundervis view GROUP``) and the widget
(``thundervis.show(GROUP)``).

The first rank is the lowest rank whose recording can be read (its summary in the group's
overview has no error); a group none of whose ranks can be read is one sentence naming the lowest
rank and why.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .errors import DataError


@dataclass(frozen=True)
class RankChoice:
    """The ranks of a group in order (``ranks``), those that can be read (``readable``) and the
    one a view opens on (``first``)."""

    ranks: tuple[int, ...]
    readable: tuple[int, ...]
    first: int

    def as_json(self) -> dict:
        """Return ``{"ranks", "readable", "first"}``."""
        return {"ranks": list(self.ranks), "readable": list(self.readable), "first": self.first}


def rank_choice(overview) -> RankChoice:
    """Return the :class:`RankChoice` of a group's overview (``recording.group.GroupOverview``:
    ``ranks`` with ``rank`` and ``error``); :class:`DataError` (one sentence) when it holds no rank
    or none can be read."""
    rows = sorted(overview.ranks, key=lambda r: r.rank)
    if not rows:
        raise DataError(f"the group {overview.path} holds no rank recordings.")
    readable = tuple(r.rank for r in rows if not r.error)
    if not readable:
        why = str(rows[0].error).rstrip(".")
        raise DataError(f"no rank of the group {overview.path} can be read (rank {rows[0].rank}: {why}).")
    return RankChoice(tuple(r.rank for r in rows), readable, readable[0])


def first_rank(overview, rank: Optional[int] = None) -> int:
    """Return the rank a view of the group with overview ``overview`` opens on: ``rank`` when
    given, else :func:`rank_choice`'s first; DataError as :func:`rank_choice` says."""
    return int(rank) if rank is not None else rank_choice(overview).first
