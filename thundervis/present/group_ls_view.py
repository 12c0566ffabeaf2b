"""The ``ls`` view of a group folder (a multi-process run, ``ls GROUP`` without ``--rank``): the
reader's ``GroupOverview`` with what present/ says of it, as one frozen value that ``ls GROUP
--json`` dumps and the text ``ls GROUP`` lays out.

Beside the reader's facts (launches, one summary per rank, absent ranks, trace variants) it holds
each variant's label (``present.variants``: ``A`` for the lowest rank's ...), per rank its variant's
label and the rank that stands for its variant, and the rank every view opens on
(``present.ranks``). Recorded strings stay as recorded: the front end makes them safe.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .errors import DataError
from .ls_view import frozen, plain
from .ranks import rank_choice
from .variants import first_rank_of, variant_labels


@dataclass(frozen=True)
class GroupLsRank:
    """One rank as ``ls GROUP`` shows it: the reader's rank summary (``summary``: rank, status,
    host, pid, counts, fingerprint, error, missing), its variant's label (None when the ranks
    compiled one variant or its traces are unknown) and ``same_as``: the rank that stands for its
    variant when that is another rank (None otherwise)."""

    summary: Any
    variant: Optional[str]
    same_as: Optional[int]

    def as_json(self) -> dict:
        """Return the ``ranks[]`` item of ``ls GROUP --json``: the reader's, plus ``variant`` and
        ``same_as``."""
        return {**self.summary.as_json(), "variant": self.variant, "same_as": self.same_as}


@dataclass(frozen=True)
class GroupLsView:
    """Everything ``ls GROUP`` shows (see the module doc). ``overview``: the reader's
    ``GroupOverview``; ``variant_labels``: fingerprint -> label; ``first_rank``: the rank views open
    on (None when no rank can be read)."""

    overview: Any
    ranks: tuple[GroupLsRank, ...]
    variant_labels: Mapping
    first_rank: Optional[int]

    def as_json(self) -> dict:
        """Return the ``ls GROUP --json`` document: the reader's group overview with the ranks'
        ``variant`` and ``same_as``, ``variant_labels`` and ``first_rank``."""
        d = self.overview.as_json()
        d["ranks"] = [r.as_json() for r in self.ranks]
        d.update({"variant_labels": plain(self.variant_labels), "first_rank": self.first_rank})
        return d


def group_ls_view(overview) -> GroupLsView:
    """Return the :class:`GroupLsView` of a group's overview (``recording.group.GroupOverview``)."""
    labels = variant_labels(overview.variants)
    first = {fp: first_rank_of(ranks) for fp, ranks in overview.variants.items()}
    several = len(labels) > 1
    ranks = []
    for r in overview.ranks:
        same = first.get(r.fingerprint)
        ranks.append(GroupLsRank(r, labels.get(r.fingerprint) if several else None,
                                 same if same is not None and same != r.rank else None))
    try:
        opens: Optional[int] = rank_choice(overview).first
    except DataError:  # no rank can be read: ls still lists them, each with its error
        opens = None
    return GroupLsView(overview, tuple(ranks), frozen(labels), opens)
