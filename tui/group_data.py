"""Everything the TUI reads from a group (one recording per rank, ``thundervis run --nproc-per-node``).

:class:`GroupData` wraps :class:`thundervis.recording.group.Group`: the group's summary
(:class:`~thundervis.recording.group.GroupOverview`, the shared row model), one row per rank for the
rank picker, one :class:`tui.data.RecordingData` per rank opened (kept open, so switching back is a
lookup and a worker still reading a rank it left never sees it closed), the rank comparison
(:func:`thundervis.diff.ranks.compare_ranks`) and the cross-rank diff of one pass as
:mod:`thundervis.diff.render` rows. Every method may run in a worker thread. Strings are returned
as recorded: widgets make them visible when they draw them.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Optional

from thundervis.present.variants import variant_labels

from .data import DataError, RecordingData


@dataclass(frozen=True)
class GroupInfo:
    """What the top bar says about the group: its folder, status, ranks, variants."""

    path: str
    status: str
    n_ranks: int
    world_size: Optional[int]
    identical: bool
    n_variants: int
    absent: tuple


@dataclass(frozen=True)
class RankRow:
    """One row of the rank picker. ``variant``: the letter of its traces' variant (A: the lowest
    rank's) or a fingerprint prefix past Z; ``problem``: why it cannot be opened or what it lacks
    (its variant's file or the group's trace store missing); ``compile_ms``/``step_ms`` None when
    not read yet or not recorded (``step_ms``: the median of its compiled chains per step, profiled
    runs only)."""

    rank: int
    restart: int
    status: Optional[str]
    variant: Optional[str]
    fingerprint: Optional[str]
    host: Optional[str]
    problem: Optional[str] = None
    compile_ms: Optional[float] = None
    step_ms: Optional[float] = None
    recorded: bool = True  # False: expected from the world size but never written


def open_group_data(path: str) -> "GroupData":
    """Open the group folder at ``path``; raise :class:`DataError` (one sentence) when it is not a
    group or has no rank recording."""
    from thundervis.recording import RecordingError
    from thundervis.recording import open_group
    try:
        group = open_group(path)
        if not group.ranks():
            raise RecordingError(f"the group {path} holds no rank recordings (rank-NNNNN.tvrec) yet.")
    except (RecordingError, OSError) as e:
        raise DataError(str(e)) from None
    return GroupData(group)


class GroupData:
    """The TUI's view of one group folder (see the module docstring)."""

    def __init__(self, group):
        self._group = group
        self.path = group.path
        self._lock = threading.Lock()
        self._ranks: dict[int, RecordingData] = {}
        self._overview = None
        self._comparison = None
        self._rows: dict[tuple, tuple] = {}

    def close(self) -> None:
        """Close every rank recording opened."""
        with self._lock:
            opened, self._ranks = list(self._ranks.values()), {}
        for data in opened:
            data.close()

    @staticmethod
    def _call(fn, *args):
        from thundervis.recording import RecordingError, UnknownItem
        try:
            return fn(*args)
        except (RecordingError, UnknownItem, OSError) as e:
            raise DataError(str(e)) from None

    # -- the group ------------------------------------------------------------------------------

    def ranks(self) -> list[int]:
        """Return the ranks that have a recording, in order."""
        return self._call(self._group.ranks)

    def overview(self, fresh: bool = False):
        """Return the group's :class:`~thundervis.recording.group.GroupOverview` (read once;
        ``fresh``: read it again, as a live group changes)."""
        if fresh or self._overview is None:
            self._overview = self._call(self._group.overview)
        return self._overview

    def info(self, fresh: bool = False) -> GroupInfo:
        """Return the top bar's facts about the group."""
        ov = self.overview(fresh)
        return GroupInfo(ov.path, ov.status, len(ov.ranks), ov.world_size, ov.identical, len(ov.variants),
                         tuple(ov.absent))

    def rank_rows(self, fresh: bool = False) -> list[RankRow]:
        """Return one row per rank (recorded ones, then those never recorded), without times
        (:meth:`rank_times` reads those)."""
        ov = self.overview(fresh)
        labels = variant_labels(ov.variants)
        rows = []
        for r in ov.ranks:
            problem = r.error
            if problem is None and r.missing:
                problem = "missing: " + "; ".join(r.missing[:2]) + (" …" if len(r.missing) > 2 else "")
            rows.append(RankRow(r.rank, r.restart, r.status, labels.get(r.fingerprint), r.fingerprint, r.host,
                                problem))
        rows += [RankRow(a, 0, None, None, None, None, "never recorded (no rank file)", recorded=False)
                 for a in ov.absent]
        return sorted(rows, key=lambda row: row.rank)

    def rank_times(self, rank: int) -> tuple[Optional[float], Optional[float]]:
        """Return (compile time of every graph, compiled step time) of ``rank`` in milliseconds;
        None for what was not recorded (the step time needs ``--profile``)."""
        from thundervis.recording import open_recording
        path = self._call(self._group.rank_path, rank)
        with self._call(lambda: open_recording(path, check=False)) as rec:
            from thundervis.present.compile_times import read_compile_times, run_compile_s
            compile_s = run_compile_s(self._call(read_compile_times, rec))  # forward + backward
            chains = self._call(rec.timings).chains
        compile_ms = compile_s * 1e3 if compile_s is not None else None
        step_ms = sum(c.median_us for c in chains) / 1e3 if chains else None
        return compile_ms, step_ms

    # -- one rank -------------------------------------------------------------------------------

    def rank_data(self, rank: int) -> RecordingData:
        """Return the :class:`RecordingData` of ``rank`` (opened once, validated, kept open)."""
        with self._lock:
            data = self._ranks.get(rank)
        if data is not None:
            return data
        from thundervis.recording import RecordingError
        try:
            data = RecordingData(self._group.open_rank(rank))
        except (RecordingError, OSError) as e:
            raise DataError(str(e)) from None
        with self._lock:
            if rank in self._ranks:  # another thread opened it meanwhile
                extra, data = data, self._ranks[rank]
                extra.close()
            else:
                self._ranks[rank] = data
        return data

    def start(self, rank: Optional[int] = None) -> tuple[int, RecordingData]:
        """Return (rank, its data) to show first: ``rank``, or the rank present's one rule picks
        (``present.ranks.first_rank``: the lowest readable one, as the widget and the CLI open);
        DataError (one sentence) when it cannot be opened."""
        from thundervis.present.ranks import first_rank
        if rank is None:
            rank = first_rank(self.overview())
        return rank, self.rank_data(rank)

    # -- comparison -----------------------------------------------------------------------------

    def compare(self):
        """Return the :class:`thundervis.diff.ranks.RankComparison` of the group (computed once:
        it reads every variant's traces; call it from a worker)."""
        if self._comparison is None:
            from thundervis.diff.ranks import compare_ranks
            self._comparison = self._call(compare_ranks, self._group)
        return self._comparison

    def rank_diff_rows(self, ref_rank: int, rank: int, graph: int, chain: str, index: int, side: bool,
                       context: Optional[int]) -> tuple[list, dict]:
        """Return the display rows (``thundervis.diff.render`` side-by-side or unified, folded to
        ``context``) of pass ``index`` of ``chain`` of ``graph`` from rank ``ref_rank`` to rank
        ``rank``, and the diff's per-status counts."""
        key = (ref_rank, rank, graph, chain, index, side, context)
        with self._lock:
            if key in self._rows:
                return self._rows[key]
        from thundervis.diff.labelled import labelled_diff
        from thundervis.diff.render import side_rows, unified_rows
        a = self.rank_data(ref_rank).trace(graph, chain, index)
        b = self.rank_data(rank).trace(graph, chain, index)
        d = labelled_diff(a, b, graph, chain, (index, a.pass_name), (index, b.pass_name), ranks=(ref_rank, rank))
        out = (side_rows(d, context) if side else unified_rows(d, context), d.counts())
        with self._lock:
            if len(self._rows) >= 16:
                self._rows.pop(next(iter(self._rows)))
            self._rows[key] = out
        return out

    def name(self) -> str:
        """Return the group folder's name (what the top bar shows)."""
        return os.path.basename(self.path.rstrip(os.sep)) or self.path
