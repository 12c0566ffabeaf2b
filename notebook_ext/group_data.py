"""Everything the widget reads from a group of rank recordings (``thundervis run --nproc-per-node N``
writes one ``*.tvgroup`` folder), as JSON-ready values.

:class:`GroupData` answers three things, each only when asked: the rank picker's list (from
:meth:`Group.overview`, which reads each rank's own small part and each variant once, never every
rank's traces), one rank's :class:`~.data.RecordingData` (that rank's recording is opened when it
is picked), and the rank comparison (:func:`thundervis.diff.ranks.compare_ranks`, computed the
first time the *Ranks* tab opens) with the cross-rank diff of any differing pass on request.
Strings go out as they were recorded; the browser shows them with ``textContent`` and the static
HTML escapes them.
"""
from __future__ import annotations

import difflib
import os
import statistics
import threading
from typing import Optional

from thundervis.diff.labelled import labelled_diff
from thundervis.recording import RecordingError, UnknownItem
from thundervis.recording import rank_ranges

from thundervis.present.units import format_skew, format_us
from thundervis.present.variants import first_rank_of, variant_labels

from .data import DataError, RecordingData
from .diff_data import diff_json

# The browser gets at most this many differing passes per variant and kernels in the skew table
# (with the total, so it can say how many were left out); ``thundervis diff --ranks --json`` has all.
MAX_DIFFERENCES = 200
MAX_SKEWS = 200
# A variant's rank list is sent in full up to this many ranks (always as compact ranges too).
MAX_RANKS_LISTED = 64
# Lines of the printed-trace diff sent when two ranks' lines are the same but their traces differ.
MAX_PRINTED_DIFF = 400

# What the browser asks a group for (the rest goes to the shown rank's RecordingData).
GROUP_REQUESTS = ("ranks", "rank_diff")

NOT_PROFILED = ("the ranks were not profiled, so there are no kernel times to compare: run with "
                "thundervis run --nproc-per-node N --profile SCRIPT for every kernel's time on every rank.")
ONE_TIMED_RANK = "only one rank has kernel times: there is nothing to compare across ranks."


def is_group_source(obj) -> bool:
    """Return True when ``obj`` is a group: an open :class:`~thundervis.recording.group.Group` or the
    path of a group folder."""
    from thundervis.recording import Group, is_group
    if isinstance(obj, Group):
        return True
    return isinstance(obj, (str, os.PathLike)) and is_group(os.fspath(obj))


def open_group_source(obj) -> "GroupData":
    """Return the :class:`GroupData` of ``obj`` (a group folder path or an open ``Group``);
    :class:`DataError` (one sentence) when it is not a group folder."""
    from thundervis.recording import Group, open_group
    if isinstance(obj, GroupData):
        return obj
    if isinstance(obj, Group):
        return GroupData(obj)
    try:
        return GroupData(open_group(os.fspath(obj)))
    except RecordingError as e:
        raise DataError(str(e)) from None


def printed_diff(a: str, b: str, context: int = 2) -> list:
    """Return the unified diff of two printed traces as ``[marker, text]`` rows (marker ``-``, ``+``,
    `` `` or ``@`` for a hunk header), the first (header) line of each left out (it holds the
    pass's duration, which differs on every rank); at most :data:`MAX_PRINTED_DIFF` rows."""
    rows = []
    for line in difflib.unified_diff(a.splitlines()[1:], b.splitlines()[1:], lineterm="", n=context):
        if line.startswith(("---", "+++")):
            continue
        rows.append(["@" if line.startswith("@@") else line[:1], line[1:] if not line.startswith("@@") else line])
        if len(rows) >= MAX_PRINTED_DIFF:
            rows.append(["@", "… (more lines differ)"])
            break
    return rows


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DataError(f"{what} must be a number.")
    try:
        return int(value)
    except ValueError:
        raise DataError(f"{what} must be a number.") from None


class GroupData:
    """JSON-ready views of one group folder; the overview and the comparison are read once and
    cached, rank recordings are opened only when a rank is shown or compared."""

    def __init__(self, group):
        self.group = group
        self._lock = threading.Lock()
        self._overview = None
        self._comparison: Optional[dict] = None
        self._rank_diffs: dict = {}

    # -- the rank picker ----------------------------------------------------------------------

    def overview(self):
        """Return the group's :class:`~thundervis.recording.group.GroupOverview` (read once)."""
        if self._overview is None:
            try:
                with self._lock:
                    self._overview = self.group.overview()
            except (RecordingError, OSError) as e:
                raise DataError(str(e)) from None
        return self._overview

    def variant_labels(self) -> dict:
        """Return {fingerprint: ``A``, ``B``, ...}: the variants' labels (``present.variants``)."""
        return variant_labels(self.overview().variants)

    def overview_json(self) -> dict:
        """Return what the rank picker and the header show: the group's status, whether the ranks'
        traces are identical, its launches' target, and every rank (status, exit code, host,
        variant label, why unreadable, which stored texts are missing) plus the ranks that never
        recorded (``absent``)."""
        ov = self.overview()
        labels = self.variant_labels()
        target = next((" ".join(l.target) for l in ov.launches if l.target), "")
        # per rank only what the picker shows: a 1024-rank group's list stays a couple of hundred KiB
        ranks = [{"rank": r.rank, "restart": r.restart, "file": os.path.basename(r.path), "status": r.status,
                  "exit_code": r.exit_code, "host": r.host, "variant": labels.get(r.fingerprint),
                  "error": r.error, "missing": list(r.missing)}
                 for r in ov.ranks]
        variants = [{"label": labels[fp], "fingerprint": fp, "ranks_text": rank_ranges(rs), "n_ranks": len(rs)}
                    for fp, rs in sorted(ov.variants.items(), key=lambda kv: (min(kv[1]), kv[0]))]
        return {"kind": "group", "path": ov.path, "name": os.path.basename(ov.path.rstrip(os.sep)),
                "status": ov.status, "world_size": ov.world_size or len(ov.ranks), "identical": ov.identical,
                "target": target, "launches": [{"node_rank": l.node_rank, "status": l.status, "host": l.host,
                                                 "exit_code": l.exit_code} for l in ov.launches],
                "ranks": ranks, "absent": list(ov.absent), "absent_text": rank_ranges(ov.absent),
                "variants": variants}

    def first_rank(self) -> int:
        """Return the rank the widget opens on (``present.ranks.first_rank``: the lowest rank whose
        recording can be read); DataError when none can."""
        from thundervis.present.ranks import first_rank
        return first_rank(self.overview())

    def fingerprint_of(self, rank: int) -> Optional[str]:
        """Return the fingerprint of ``rank``'s traces (None when unknown)."""
        return next((r.fingerprint for r in self.overview().ranks if r.rank == rank), None)

    def rank_data(self, rank: Optional[int] = None) -> RecordingData:
        """Open ``rank``'s recording (None: the lowest readable rank) and return its
        :class:`RecordingData`; DataError (one sentence) for a rank the group does not hold or
        cannot read."""
        rank = self.first_rank() if rank is None else _int(rank, "rank")
        try:
            rec = self.group.open_rank(rank)
        except RecordingError as e:
            raise DataError(str(e)) from None
        return RecordingData(rec)

    # -- the rank comparison ------------------------------------------------------------------

    def comparison_json(self) -> dict:
        """Return the rank comparison (computed on first call, then cached): identical or not, the
        reference rank, every variant with its ranks and the passes where it differs from the
        reference (``counts`` of the pass diff where one was computed), the unreadable ranks, and
        the per-kernel skew table, most skewed first, or ``skew_note`` saying why there is none."""
        if self._comparison is None:
            from thundervis.diff.ranks import compare_ranks
            try:
                with self._lock:
                    comp = compare_ranks(self.group)
            except (RecordingError, OSError) as e:
                raise DataError(str(e)) from None
            self._comparison = self._comparison_payload(comp)
        return self._comparison

    def _comparison_payload(self, comp) -> dict:
        labels = self.variant_labels()
        variants = []
        for v in comp.variants:
            diffs = [{"graph": d.graph, "chain": d.chain, "index": d.index, "name": d.name, "only": d.only,
                      "counts": d.diff.counts() if d.diff is not None else None,
                      "summary": d.diff.summary() if d.diff is not None else None}
                     for d in v.differences[:MAX_DIFFERENCES]]
            variants.append({"label": labels.get(v.fingerprint), "fingerprint": v.fingerprint,
                             "ranks": list(v.ranks[:MAX_RANKS_LISTED]), "ranks_text": rank_ranges(v.ranks),
                             "n_ranks": len(v.ranks), "first_rank": first_rank_of(v.ranks),
                             "reference": comp.reference in v.ranks, "differences": diffs,
                             "n_differences": len(v.differences)})
        skews = []
        for k in comp.skews[:MAX_SKEWS]:
            slow, fast = k.slowest, k.fastest
            median = statistics.median(k.per_rank_us.values())
            skews.append({"graph": k.graph, "chain": k.chain, "name": k.name, "skew": k.skew,
                          "skew_text": format_skew(k.skew), "slowest_rank": slow, "slowest_us": k.per_rank_us[slow],
                          "slowest_text": format_us(k.per_rank_us[slow]), "fastest_rank": fast,
                          "fastest_us": k.per_rank_us[fast], "fastest_text": format_us(k.per_rank_us[fast]),
                          "median_us": median, "median_text": format_us(median), "n_ranks": len(k.per_rank_us)})
        note = None
        if not comp.skews and comp.reference >= 0:
            note = ONE_TIMED_RANK if self._reference_profiled(comp.reference) else NOT_PROFILED
        return {"kind": "ranks", "path": comp.path, "reference_rank": comp.reference, "identical": comp.identical,
                "n_ranks": sum(v["n_ranks"] for v in variants), "variants": variants,
                "unreadable": [{"rank": r, "error": e} for r, e in sorted(comp.unreadable.items())],
                "skew": skews, "n_skews": len(comp.skews), "skew_note": note}

    def _reference_profiled(self, rank: int) -> bool:
        try:
            with self.group.open_rank(rank) as rec:
                return bool(rec.timings().kernels)
        except RecordingError:
            return False

    def rank_diff_json(self, rank: int, graph: int, chain: str, index: int) -> dict:
        """Return the side-by-side diff (:func:`~.diff_data.diff_json`) of one pass from the reference
        rank (the lowest readable one) to ``rank``; DataError when either side lacks that pass."""
        key = (rank, graph, chain, index)
        if key not in self._rank_diffs:
            reference = self.comparison_json()["reference_rank"]
            if reference < 0:
                raise DataError("no rank recording of this group can be read.")
            traces, texts, names = [], [], []
            try:
                with self._lock:
                    for r in (reference, rank):
                        with self.group.open_rank(r) as rec:
                            try:
                                info = rec.pass_info(graph, chain, index)
                            except UnknownItem:
                                raise DataError(f"rank {r} has no pass {index} in graph {graph} {chain} "
                                                "(the pass exists on one side only).") from None
                            traces.append(rec.pass_trace(graph, chain, index))
                            texts.append(rec.pass_text(graph, chain, index))
                            names.append(info.name)
            except RecordingError as e:
                raise DataError(str(e)) from None
            d = labelled_diff(*traces, graph, chain, (index, names[0]), (index, names[1]), ranks=(reference, rank))
            out = diff_json(d, graph, chain, index, index, layers=False)  # as diff --ranks: no layer folds
            # The diff aligns the lines' code; where that is the same on both ranks the traces differ
            # in what the code does not show (shapes, dtypes, devices, source): the printed traces say.
            same = all(n == 0 for status, n in d.counts().items() if status != "unchanged")
            out.update(reference_rank=reference, rank=rank, printed_diff=printed_diff(*texts) if same else None)
            self._rank_diffs[key] = out
        return self._rank_diffs[key]

    def handle(self, request: dict) -> dict:
        """Answer a group request from the browser: ``{"what": "ranks"}`` (the comparison) or
        ``{"what": "rank_diff", "rank", "graph", "chain", "index"}``."""
        what = request.get("what")
        if what == "ranks":
            return self.comparison_json()
        if what == "rank_diff":
            return self.rank_diff_json(_int(request.get("rank"), "rank"), _int(request.get("graph"), "graph"),
                                       str(request.get("chain")), _int(request.get("index"), "index"))
        raise DataError(f"unknown request {what!r}")

