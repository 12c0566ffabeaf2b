"""What the TUI's communication screen shows, read from a recording: the communication ops traced
into the graphs and the collectives run between them, grouped by where they ran.

A thin layer over the shared row model :mod:`thundervis.recording.collectives` (``collectives``,
``collective_counts``, ``collective_places``, ``describe``, ``place_text``): no second reading of the
events. Strings are returned as recorded; the screen makes them visible when it draws them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlaceGroup:
    """Collectives that ran at one place between compiled graphs: ``where`` (``between graph 0
    backward and graph 0 forward``) and one ``describe`` line per collective, in the order they ran
    (with the step they ran in)."""

    where: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class CommunicationInfo:
    """The run's communication: ``in_traces`` (communication ops in the last pass of every executed
    chain), ``counts`` (a ``thundervis.recording.collectives.CollectiveCounts``), ``places`` (whole-run
    counts per place, ``place_text`` lines) and ``groups`` (the collectives listed one by one, per
    place, in the order the places were first reached)."""

    in_traces: int
    counts: object
    places: tuple[str, ...]
    groups: tuple[PlaceGroup, ...]

    @property
    def empty(self) -> bool:
        """Return True when the run had no communication at all (nothing to show)."""
        return not self.in_traces and not self.counts.between_graphs and not self.counts.in_graphs_run \
            and not self.groups


def read_communication(rec) -> CommunicationInfo:
    """Return the :class:`CommunicationInfo` of an open ``thundervis.recording.Recording`` (reads
    the last pass of every executed chain: call it from a worker)."""
    from thundervis.present.collectives import describe, place_text, where_text
    from thundervis.present.collectives import (
        collective_counts, collective_places, collectives, rows_by_place, trace_communication_ops)
    rows = collectives(rec)
    return CommunicationInfo(
        trace_communication_ops(rec), collective_counts(rec, rows),
        tuple(place_text(p) for p in collective_places(rec)),
        tuple(PlaceGroup(where_text(after, before), tuple(f"step {r.step:<2} {describe(r)}" for r in found))
              for after, before, found in rows_by_place(rows)))
