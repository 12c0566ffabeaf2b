"""Rank comparison: did the ranks of a group compile identical traces, where do they differ, and
which rank is slowest per kernel.

:func:`compare_ranks` groups the ranks by the fingerprint of their traces (one *variant* per
distinct set of traces), takes the lowest rank as the reference, and for every other variant lists
the passes whose traces differ or exist on one side only, with the pass diff
(:func:`thundervis.diff.diff_traces`) of the first differing pass of each chain. With profiled ranks
it also lines up every kernel's median time across ranks: the slowest and fastest rank and the
skew (slowest / fastest).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from thundervis.present.units import format_skew, format_us, plural
from thundervis.present.variants import variant_labels
from thundervis.recording import RecordingError

from .labelled import labelled_diff


@dataclass
class PassDifference:
    """A pass whose trace differs between the reference rank and a variant (``only``: the pass
    exists on one side only: ``reference`` or ``variant``)."""

    graph: int
    chain: str
    index: int
    name: str
    only: Optional[str] = None
    diff: object = None  # TraceDiff of the first differing pass of its chain

    def as_json(self) -> dict:
        """Return plain JSON values (the diff as its counts and changed lines)."""
        d = {"graph": self.graph, "chain": self.chain, "index": self.index, "name": self.name,
             "only": self.only}
        if self.diff is not None:
            d["counts"] = self.diff.counts()
            d["changed"] = [{"status": r.status, "a": r.a.text if r.a else None, "b": r.b.text if r.b else None}
                            for r in self.diff.lines if r.status != "same"][:200]
        return d


@dataclass
class Variant:
    """Ranks that compiled the same traces, and how they differ from the reference variant."""

    fingerprint: str
    ranks: tuple
    differences: list = field(default_factory=list)

    def as_json(self) -> dict:
        """Return plain JSON values."""
        return {"fingerprint": self.fingerprint, "ranks": list(self.ranks),
                "differences": [d.as_json() for d in self.differences]}


@dataclass
class KernelSkew:
    """One kernel's (or torch op's) median time on every rank that timed it."""

    graph: int
    chain: str
    name: str
    per_rank_us: dict

    @property
    def slowest(self) -> int:
        """The rank with the largest median time."""
        return max(self.per_rank_us, key=lambda r: (self.per_rank_us[r], -r))

    @property
    def fastest(self) -> int:
        """The rank with the smallest median time."""
        return min(self.per_rank_us, key=lambda r: (self.per_rank_us[r], r))

    @property
    def skew(self) -> float:
        """Slowest median / fastest median (1.0: every rank took the same time)."""
        lo = self.per_rank_us[self.fastest]
        return self.per_rank_us[self.slowest] / lo if lo > 0 else 1.0

    def as_json(self) -> dict:
        """Return plain JSON values."""
        return {"graph": self.graph, "chain": self.chain, "name": self.name,
                "per_rank_us": {str(k): v for k, v in sorted(self.per_rank_us.items())},
                "slowest_rank": self.slowest, "fastest_rank": self.fastest, "skew": self.skew}


@dataclass
class RankComparison:
    """What ``thundervis diff --ranks GROUP`` reports."""

    path: str
    reference: int
    variants: list
    skews: list
    unreadable: dict

    @property
    def identical(self) -> bool:
        """True when every readable rank compiled the same traces."""
        return len(self.variants) <= 1

    def as_json(self) -> dict:
        """Return plain JSON values."""
        return {"path": self.path, "reference_rank": self.reference, "identical": self.identical,
                "variants": [v.as_json() for v in self.variants],
                "kernel_skew": [k.as_json() for k in self.skews],
                "unreadable": {str(k): v for k, v in self.unreadable.items()}}


def _differences(ref_items: list, other_items: list) -> list[PassDifference]:
    ref = {(g, c, i): (n, fp) for g, c, i, n, fp in ref_items}
    other = {(g, c, i): (n, fp) for g, c, i, n, fp in other_items}
    out = []
    for key in sorted(set(ref) | set(other), key=lambda k: (k[0], k[1], k[2])):
        if key not in other:
            out.append(PassDifference(*key, ref[key][0], only="reference"))
        elif key not in ref:
            out.append(PassDifference(*key, other[key][0], only="variant"))
        elif ref[key] != other[key]:
            out.append(PassDifference(*key, other[key][0]))
    return out


def compare_ranks(group, max_diffs_per_variant: int = 4) -> RankComparison:
    """Compare the ranks of ``group`` (a :class:`thundervis.recording.group.Group`): variants of
    identical traces, the passes where each differs from the lowest rank (with the pass diff of the
    first differing pass of each chain, at most ``max_diffs_per_variant``), and per-kernel timing
    skew when the ranks were profiled."""
    from thundervis.recording.group import rank_fingerprint
    from thundervis.recording import open_recording
    ov = group.overview()  # fingerprints of every rank, read cheaply (rank files: from their variant)
    files = {r.rank: r.path for r in ov.ranks}
    fps = {r.rank: r.fingerprint for r in ov.ranks if r.fingerprint and not r.error}
    unreadable = {r.rank: r.error for r in ov.ranks if r.error}
    items: dict[int, list] = {}
    timing: dict[tuple, dict] = {}
    first_of = {}
    for rank, fp in sorted(fps.items()):
        first_of.setdefault(fp, rank)
    profiled = None
    for rank in sorted(fps):
        if first_of[fps[rank]] != rank and profiled is False:
            continue  # nothing to read: its traces are its variant's and no rank was profiled
        try:
            with open_recording(files[rank], check=False) as rec:
                if first_of[fps[rank]] == rank:
                    items[rank] = rank_fingerprint(rec)[1]
                kernels = rec.timings().kernels
                if profiled is None:
                    profiled = bool(kernels)
                for k in kernels:
                    if k.median_us is not None:
                        timing.setdefault((k.graph, k.chain, k.name), {})[rank] = k.median_us
        except RecordingError as e:
            unreadable[rank] = str(e)
            fps.pop(rank, None)
    if not fps:
        return RankComparison(group.path, -1, [], [], unreadable)
    reference = min(fps)
    by_fp: dict[str, list[int]] = {}
    for rank, fp in sorted(fps.items()):
        by_fp.setdefault(fp, []).append(rank)
    variants = []
    for fp, ranks in sorted(by_fp.items(), key=lambda kv: kv[1][0]):
        v = Variant(fp, tuple(ranks))
        if reference not in ranks and reference in items and ranks[0] in items:
            v.differences = _differences(items[reference], items[ranks[0]])
            _attach_diffs(group, reference, ranks[0], v.differences, max_diffs_per_variant)
        variants.append(v)
    skews = [KernelSkew(g, c, n, per) for (g, c, n), per in sorted(timing.items()) if len(per) > 1]
    skews.sort(key=lambda k: -k.skew)
    return RankComparison(group.path, reference, variants, skews, unreadable)


def _attach_diffs(group, ref_rank: int, rank: int, diffs: list, limit: int) -> None:
    """Give the first differing pass of each chain its trace diff (reference -> variant)."""
    seen_chains, done = set(), 0
    todo = [d for d in diffs if d.only is None]
    if not todo:
        return
    with group.open_rank(ref_rank) as a, group.open_rank(rank) as b:
        for d in todo:
            if done >= limit or (d.graph, d.chain) in seen_chains:
                continue
            seen_chains.add((d.graph, d.chain))
            try:
                d.diff = labelled_diff(a.pass_trace(d.graph, d.chain, d.index), b.pass_trace(d.graph, d.chain, d.index),
                                   d.graph, d.chain, (d.index, d.name), (d.index, d.name), ranks=(ref_rank, rank))
            except RecordingError:
                d.diff = None
            done += 1


def render_text(comp: RankComparison, context: Optional[int] = 3, max_skews: int = 20) -> str:
    """Return the human-readable rank comparison."""
    from thundervis.diff import render
    lines = []
    if comp.reference < 0:
        lines.append("no rank recording could be read")
    elif comp.identical:
        v = comp.variants[0]
        lines.append(f"traces identical on all {len(v.ranks)} ranks (fingerprint {v.fingerprint})")
    else:
        lines.append(f"traces differ: {len(comp.variants)} variants; reference rank {comp.reference}")
        labels = variant_labels({v.fingerprint: v.ranks for v in comp.variants})
        for v in comp.variants:
            ranks = ", ".join(str(r) for r in v.ranks[:16]) + (" ..." if len(v.ranks) > 16 else "")
            name = f"variant {labels[v.fingerprint]} ({v.fingerprint})"
            if not v.differences:
                lines.append(f"{name}: ranks {ranks} (the reference)")
                continue
            lines.append(f"{name}: ranks {ranks}: {plural(len(v.differences), 'pass', 'passes')} differ")
            for d in v.differences[:40]:
                side = f" (only on the {d.only})" if d.only else ""
                lines.append(f"  graph {d.graph} {d.chain} pass {d.index} {d.name}{side}")
            for d in v.differences:
                if d.diff is not None:  # the rendered diff starts with its ---/+++ header
                    lines.append(render.unified_plain(d.diff, context).rstrip("\n"))
                    lines.append(d.diff.summary())
    for rank, why in sorted(comp.unreadable.items()):
        lines.append(f"rank {rank}: unreadable: {why}")
    if comp.skews:
        lines.append(f"kernel time across ranks (median per rank; {plural(len(comp.skews), 'kernel')}, most skewed first):")
        lines.append(f"  {'kernel':<28} {'chain':<9} {'slowest':>8} {'median':>10} {'fastest':>8} {'median':>10} {'skew':>6}")
        for k in comp.skews[:max_skews]:
            lines.append(f"  {k.name[:28]:<28} {k.chain:<9} {'rank ' + str(k.slowest):>8} "
                         f"{format_us(k.per_rank_us[k.slowest]):>10} {'rank ' + str(k.fastest):>8} "
                         f"{format_us(k.per_rank_us[k.fastest]):>10} {format_skew(k.skew):>6}")
    return "\n".join(lines) + "\n"
