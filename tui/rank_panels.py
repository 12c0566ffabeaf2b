"""The text of the group views: the top bar's group part, rank picker rows, the rank comparison's
summary, variants, differences and kernel skew table. Pure functions from ``tui.group_data`` rows
and the shared rank comparison model (:mod:`thundervis.diff.ranks`) to ``rich.text.Text``, every
recorded string made visible with :mod:`thundervis.safe_text`."""
from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.text import Text

from thundervis.safe_text import visible_line

from thundervis.present.units import format_skew, format_us, plural, short_fingerprint
from .group_data import GroupInfo, RankRow
from .panels import BAD, DIM, HEAD, OK, WARN, ms_text

ACCENT = "#56b6c2"


def status_colour(status: Optional[str]) -> str:
    """Return the colour of a run or group status (ok green, running yellow, the rest red)."""
    return OK if status == "ok" else WARN if status in ("running", "interrupted") else BAD


def group_bar(info: Optional[GroupInfo], name: str, rank: int) -> Text:
    """Return the group part of the top bar: folder, the rank shown, how many ranks, the group's
    status, identical or how many variants (``info`` None: not read yet)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(visible_line(name), style=Style(bold=True, color=ACCENT))
    t.append(f" rank {rank}", style=Style(bold=True))
    if info is None:
        t.append(" · reading the group …", style=DIM)
        return t
    t.append(f"/{plural(info.n_ranks, 'rank')} ", style=DIM)
    t.append(visible_line(info.status), style=Style(color=status_colour(info.status), bold=True))
    if info.identical:
        t.append(" · identical", style=Style(color=OK))
    else:
        t.append(f" · {info.n_variants} variants", style=Style(color=WARN, bold=True))
    if info.absent:
        t.append(f" · {len(info.absent)} never recorded", style=Style(color=BAD))
    return t


RANK_HEADER = f"  {'rank':>5}  {'status':<11} {'var':<10} {'host':<16} {'compile':>7} {'step':>7}  notes"


def rank_row(row: RankRow, current: Optional[int] = None) -> Text:
    """Return one rank picker row: rank (``▶`` on the one shown), status, variant, host, compile
    and step time, and what is wrong with it (in red)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("▶ " if row.rank == current else "  ", style=Style(color=WARN, bold=True))
    t.append(f"{row.rank:>5}  ", style=Style(bold=True))
    status = row.status or ("absent" if not row.recorded else "unreadable")
    t.append(f"{visible_line(status)[:11]:<11} ", style=Style(color=status_colour(row.status)))
    var = (row.variant or "-") + (f" {short_fingerprint(row.fingerprint)}" if row.fingerprint and len(row.variant or "") == 1 else "")
    t.append(f"{visible_line(var)[:10]:<10} ", style=Style(color=ACCENT))
    t.append(f"{visible_line(row.host or '-')[:16]:<16} ", style=DIM)
    t.append(ms_text(row.compile_ms) + " ")
    t.append(ms_text(row.step_ms), style=Style(color=None if row.step_ms is not None else DIM))
    if row.restart:
        t.append(f"  restart {row.restart}", style=DIM)
    if row.problem:
        t.append(f"  {visible_line(row.problem)}", style=Style(color=BAD))
    return t


def comparison_summary(comp, name: str) -> Text:
    """Return the comparison's head: identical on all ranks, or how many variants and the
    reference rank; ranks that could not be read."""
    t = Text()
    t.append("rank comparison  ", style=HEAD)
    t.append(visible_line(name) + "\n", style=Style(bold=True, color=ACCENT))
    if comp.reference < 0:
        t.append("no rank recording could be read\n", style=Style(color=BAD, bold=True))
    elif comp.identical:
        v = comp.variants[0]
        t.append(f"traces identical on all {len(v.ranks)} ranks", style=Style(color=OK, bold=True))
        t.append(f" (fingerprint {short_fingerprint(v.fingerprint)})\n", style=DIM)
    else:
        t.append(f"traces differ: {len(comp.variants)} variants", style=Style(color=WARN, bold=True))
        t.append(f" (reference rank {comp.reference}); enter: a pass's cross-rank diff\n", style=DIM)
    for rank, why in sorted(comp.unreadable.items()):
        t.append(f"rank {rank} unreadable: {visible_line(why)}\n", style=Style(color=BAD))
    return t


def ranks_text(ranks) -> str:
    """Return ``0, 1, 4-7`` for a sorted list of ranks (runs collapsed)."""
    out, start, prev = [], None, None
    for r in list(ranks) + [None]:
        if r is not None and prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    return ", ".join(out)


def variant_row(label: str, variant, reference: bool) -> Text:
    """Return the heading row of one variant: its label, fingerprint, ranks, passes that differ."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"variant {visible_line(label)} ", style=Style(bold=True, color=ACCENT))
    t.append(f"{short_fingerprint(variant.fingerprint)}  ", style=DIM)
    t.append(f"ranks {ranks_text(variant.ranks)}", style=Style(bold=True))
    if reference:
        t.append("  (the reference)", style=DIM)
    else:
        t.append(f"  {plural(len(variant.differences), 'pass', 'passes')} differ", style=Style(color=WARN))
    return t


def difference_row(d) -> Text:
    """Return one differing pass: graph, chain, pass, and which side it exists on or the diff's
    counts when it was diffed."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"    g{d.graph} {visible_line(d.chain):<9} ", style=DIM)
    t.append(f"{d.index:>2} {visible_line(d.name)}", style=Style(bold=True, color="#e5c07b"))
    if d.only:
        t.append(f"  only on the {visible_line(d.only)}", style=Style(color=BAD))
    elif d.diff is not None:
        counts = d.diff.counts()
        bits = [f"{v} {k}" for k, v in counts.items() if v and k != "unchanged"]
        t.append("  " + (", ".join(bits) if bits else "no line changed"), style=DIM)
    else:
        t.append("  differs", style=DIM)
    return t


def skew_table(comp, limit: int = 200) -> Text:
    """Return the per-kernel timing skew across ranks, most skewed first, or how to profile the
    ranks when they were not (72 columns wide: fits an 80-column terminal)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not comp.skews:
        t.append("kernel time across ranks: ", style=HEAD)
        t.append("the ranks were not profiled.\n", style=Style(color=WARN))
        t.append("Run with --profile (thundervis run --profile --nproc-per-node N SCRIPT)\n"
                 "to time every kernel on every rank.\n", style=DIM)
        return t
    t.append(f"kernel time across ranks: {plural(len(comp.skews), 'kernel')}, median per rank, most skewed first\n",
             style=HEAD)
    t.append(f"{'kernel':<20} {'chain':<8} {'slowest':>7} {'median':>9} {'fastest':>7} {'median':>9} {'skew':>6}\n",
             style=Style(bold=True))
    for k in comp.skews[:limit]:
        slow, fast = k.slowest, k.fastest
        colour = BAD if k.skew >= 1.5 else WARN if k.skew >= 1.1 else None
        t.append(f"{visible_line(k.name)[:20]:<20} {visible_line(k.chain)[:8]:<8} ")
        t.append(f"{'rank ' + str(slow):>7} {format_us(k.per_rank_us[slow]):>9} "
                 f"{'rank ' + str(fast):>7} {format_us(k.per_rank_us[fast]):>9} ")
        t.append(f"{format_skew(k.skew):>6}\n", style=Style(color=colour, bold=colour is not None))
    if len(comp.skews) > limit:
        t.append(f"… {len(comp.skews) - limit} more (thundervis diff --ranks --json)\n", style=DIM)
    return t
