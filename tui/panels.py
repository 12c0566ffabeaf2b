"""The text of the side panels: chain list rows, pass stepper rows, the details of a symbol, the
run summary. Pure functions from the reader's model objects and ``thundervis.present`` rows to
``rich.text.Text`` (all recorded strings
made visible with :mod:`thundervis.safe_text`)."""
from __future__ import annotations

import os
from typing import Optional

from rich.style import Style
from rich.text import Text

from thundervis.safe_text import capped, visible, visible_line

from . import styling
from thundervis.present.compile_times import run_cache_text
from thundervis.present.kernel_rows import KernelRow
from thundervis.present.overview import ViewOverview
from thundervis.present.progress import chain_progress
from thundervis.present.eager_regions import beside_regions, eager_short
from thundervis.present.status import ChainStatus
from thundervis.present.symbol_detail import SymbolView
from thundervis.present.units import (format_bytes, format_error, format_gbps, format_ms, format_pct,
                                      format_roofline_us, format_share, format_us, plural)

OK = "#98c379"
BAD = "#e06c75"
WARN = "#e5c07b"
DIM = styling.DIM
HEAD = Style(color="#61afef", bold=True)


def short_path(path: str) -> str:
    """Return ``path`` relative to the working folder when it is inside it, else unchanged."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def ms_text(ms: Optional[float]) -> str:
    """Return a duration right-aligned to 9 characters for the TUI's columns; the text itself is
    :func:`thundervis.present.units.format_ms` (one rule for every view)."""
    return format_ms(ms).rjust(9)


SELECTED = "▶"  # marks the chain and the pass shown: the highlight's colour is not the only sign


def chain_row(c, status: Optional[ChainStatus], selected: bool = False, cached: bool = False) -> Text:
    """Return one row of the chain picker (``c`` a ``recording.model.Chain``): the marker when it is
    the chain shown (``selected``), graph, chain, pass count, eager mark (from its
    ``present.status.ChainStatus``), ``from cache`` when its passes were replayed (``cached``)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{SELECTED if selected else ' '} ", style=Style(bold=True))
    t.append(f"g{c.graph} ", style=DIM)
    t.append(f"{visible_line(c.kind):<9}", style=Style(bold=True))
    n = len(c.passes)
    t.append(f"{n:>3} {'pass  ' if n == 1 else 'passes'}", style=DIM)
    if status is not None and status.eager:
        t.append("  ✗ eager", style=Style(color=BAD, bold=True))
    elif c.status == "compiling":
        t.append("  … live", style=Style(color=WARN))
        progress = chain_progress(c)
        if progress is not None:  # where the live compile is (present.progress)
            t.append(f" · {progress.pass_text()}", style=DIM)
    elif cached:
        t.append("  from cache", style=DIM)
    return t


def pass_row(p, selected: bool = False, cached: bool = False) -> Text:
    """Return one stepper row (``p`` a ``recording.model.PassInfo``): the marker when it is the pass
    shown (``selected``), index, name, duration, symbol count, ``cache`` when it was replayed from
    the compile cache (``cached``); unchanged passes dimmed."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(SELECTED if selected else " ", style=Style(bold=True))
    mark = "●" if p.changed else "·"
    t.append(f"{mark}", style=Style(color=OK if p.changed else DIM))
    t.append(f"{p.index:>2} ", style=DIM)
    t.append(f"{visible_line(p.name)[:10]:<10}", style=Style(bold=p.changed, color=None if p.changed else DIM))
    t.append(ms_text(p.duration_ms), style=Style(color="#d19a66" if p.duration_ms >= 100 else DIM))
    t.append(f"{p.n_symbols:>5}", style=Style(color="#56b6c2"))
    if cached:  # a word, not a colour: the row says it came from the compile cache
        t.append(" cache", style=DIM)
    return t


def run_summary(ov: ViewOverview, versions: bool = True) -> Text:
    """Return the run section: target, status (failed/killed in red), device and versions (with
    ``versions``), graphs, eager chains, functions Dynamo runs eagerly, kernel fallbacks, traceback."""
    r = ov.run
    t = Text()
    t.append("run  ", style=HEAD)
    args = [str(a) for a in (r.argv or [])[1:]]
    t.append(visible_line(r.target + (" " + " ".join(args) if args else "")) + "\n")
    t.append("status  ", style=HEAD)
    colour = OK if r.status == "ok" else WARN if r.status == "running" else BAD
    t.append(visible_line(r.status), style=Style(color=colour, bold=True))
    if r.exit_code is not None:
        t.append(f" (exit {r.exit_code})")
    t.append("\n")
    if versions:
        t.append("device  ", style=HEAD)
        t.append(visible_line(f"{r.device} · torch {r.torch}") + "\n")
    for g in ov.graphs:
        ct = ov.compile_time(g.id)  # forward plus backward, as present/compile_times words it
        took = f" · {ct.text}" if ct is not None else " · compiling"
        t.append(f"graph {g.id}", style=Style(bold=True))
        t.append(took + (f" · {visible_line(g.reason)}" if g.reason else "") + "\n", style=DIM)
        whole = ov.graph_eager(g.id)
        if whole:
            t.append(f"  ran eagerly: {visible_line(whole)}\n", style=Style(color=BAD))
            continue
        for c in g.chains:
            st = ov.status(g.id, c.kind)
            if st is not None and st.eager:
                t.append(f"  {c.kind} ran eagerly: {visible_line(st.eager)}\n", style=Style(color=BAD))
    if ov.run_status.no_graph:  # present.run_status's words
        t.append(ov.run_status.no_graph + "\n", style=DIM)
    for region in ov.eager_regions:  # code Dynamo left to eager: no graph to show it in
        t.append(f"  {visible_line(region.text)}\n", style=Style(color=BAD))
    for f in beside_regions(ov.dynamo_fallbacks):  # with no graph to show them in: said here or nowhere
        where = f" · {f.source}" if f.source else ""
        t.append(f"  {visible_line(f.what + where)}: {visible_line(f.reason)}\n", style=Style(color=BAD))
    fell = [k for k in ov.kernels if k.fallback]
    for k in fell:
        t.append(f"  {visible_line(k.name)} {visible_line(k.fallback_text)}\n", style=Style(color=WARN))
    if ov.abstract is not None:  # an abstract run: placeholders, fit and step per GPU (present.abstract_fit)
        t.append("\nabstract run\n", style=HEAD)
        for line in ov.abstract.text_lines():
            t.append(visible_line(line) + "\n", style=Style(color=WARN) if line.startswith(("stopped", "placeholders")) else "")
    if r.traceback:
        t.append("\ntraceback\n", style=Style(color=BAD, bold=True))
        t.append(visible(capped(r.traceback.rstrip(), 100_000)) + "\n", style=Style(color="#e6a0a6"))
    return t


def symbol_details(d: SymbolView) -> Text:
    """Return the details pane for one symbol (a communication op says what it is first)."""
    from thundervis.present.collectives import CLAIM_NOTE, communication_kind, is_communication, is_wait
    comm = is_communication(d.sym)
    t = Text()
    t.append(visible_line(d.sym), style=styling.S_COMM if comm else
             styling.S_FUSION if "fusion" in d.sym else styling.S_PRIM)
    t.append(f"  {visible_line(d.uid)}", style=DIM)
    if d.executor:
        t.append(f"  [{visible_line(d.executor)}]", style=styling.S_EXECUTOR)
    t.append("\n")
    if comm:
        t.append(f"{styling.COMM_MARK} communication  ", style=styling.S_COMM)
        what = "waits for a collective's result" if is_wait(d.sym) else \
            f"a collective ({visible_line(communication_kind(d.sym))}) traced into this graph"
        t.append(f"{what}: {CLAIM_NOTE} "  # present.collectives' words, as the widget and show say it
                 "(no fusion holds ops from both sides of it; CSE and DCE keep it)\n", style=Style(color=styling.COMM))
    why = d.fallback or d.note
    if comm and why == CLAIM_NOTE:  # said above, in words for this op
        why = None
    if why:
        t.append("why  ", style=Style(color=WARN, bold=True))
        t.append(visible(why) + "\n", style=Style(color=WARN))
    if d.aten or d.seq_nr is not None:
        bits = [visible_line(d.aten)] if d.aten else []
        if d.seq_nr is not None:
            bits.append(f"seq_nr {d.seq_nr}")
        t.append(" · ".join(bits) + "\n", style=DIM)
    _append_source(t, d)
    if d.came_from:
        t.append("\nfrom  ", style=HEAD)
        t.append(", ".join(visible_line(x) for x in d.came_from) + "\n")
    if d.became:
        t.append("next  ", style=HEAD)
        t.append(", ".join(visible_line(x) for x in d.became) + "\n")
    if d.ended_in:
        t.append("\nends in  ", style=HEAD)
        t.append(", ".join(visible_line(e) for e in d.ended_in) + "\n", style=styling.S_FUSION)
    if d.timing:
        t.append("time  ", style=HEAD)
        t.append(d.timing + "\n")
    if d.twins:
        t.append("\ntwins  ", style=HEAD)
        t.append("; ".join(visible_line(x) for x in d.twins) + "\n")
    _append_lineage(t, d)
    return t


def _append_source(t: Text, d: SymbolView) -> None:
    """Append symbol ``d``'s user source line to ``t``: file, module and the snippet around it."""
    if d.source_file:
        t.append("\nsource  ", style=HEAD)
        t.append(f"{visible_line(short_path(d.source_file))}:{d.source_line}\n", style=styling.S_FILE)
        if d.module:
            t.append("module  ", style=HEAD)
            t.append(visible_line(d.module) + "\n", style=styling.S_MODULE)
        if d.snippet:
            for n, line in d.snippet:
                here = n == d.source_line
                t.append(f"{'▶' if here else ' '}{n:>5} ", style=Style(color=WARN if here else DIM))
                t.append(visible_line(line) + "\n", style=Style(bold=here, color=None if here else "#9da5b4"))
        elif d.source_code:
            t.append(f"      {visible_line(d.source_code)}\n", style=styling.S_CODE)
    else:
        t.append("\nno user source line (made by the compiler)\n", style=DIM)


def _append_lineage(t: Text, d: SymbolView) -> None:
    """Append symbol ``d``'s lineage to ``t``: each chain and the pass steps that carried it."""
    if d.lineage:
        t.append("\nlineage\n", style=HEAD)
        for chain, link, steps in d.lineage:
            t.append(f" {visible_line(chain)}", style=Style(bold=True))
            if link:
                t.append(f"  via {visible_line(link)}", style=DIM)
            t.append("\n")
            for name, syms in steps:
                t.append(f"   {visible_line(name)[:20]:<18} ", style=DIM)
                t.append(visible_line(syms) + "\n")


def kernel_summary(k: KernelRow) -> Text:
    """Return the header of a kernel's detail: name, executor, where, ops, sources, timing."""
    t = Text()
    t.append(visible_line(k.name), style=styling.S_FUSION)
    t.append(f"  [{visible_line(k.tag)}]  graph {k.graph} {visible_line(k.chain)}\n", style=DIM)
    if k.fold is not None:  # present.kernel_folds: the code below is the first instance's
        f = k.fold
        t.append(f"{f.label}: ", style=HEAD)
        t.append(visible_line(f.summary) + "\n")
    if k.fallback:
        t.append(visible_line(k.fallback_text) + "\n", style=Style(color=WARN, bold=True))
    if k.note:
        t.append(visible(k.note) + "\n", style=Style(color=DIM, italic=True))
    if k.median_us is not None:
        share = f" · {format_share(k.share)} of step" if k.share is not None else ""
        clock = f" ({k.clock} time)" if k.clock else ""
        t.append(f"median {format_us(k.median_us)}{clock} over {plural(k.calls, 'call')}{share}"
                 + (f" · {format_gbps(k.gbps)}" if k.gbps else "") + "\n")
    if k.chain_time:
        t.append(f"{visible_line(k.chain)} chain: ", style=HEAD)
        t.append(visible_line(k.chain_time) + "\n")
    if k.roofline_us is not None:
        pct = f" · measured at {format_pct(k.pct_of_roofline)} of roofline" if k.pct_of_roofline is not None else \
            (" · measured time is not a GPU time: no % of roofline" if k.median_us is not None else "")
        t.append(f"roofline {format_roofline_us(k.roofline_us)} µs ({k.roofline_bound}-bound) · "
                 f"{format_bytes(k.bytes_moved)} moved · "
                 f"{k.flops:,} FLOPs{pct}\n")
    t.append(f"{plural(k.n_ops, 'op')}: ", style=HEAD)
    t.append(", ".join(visible_line(o).removeprefix("prims.") for o in k.ops[:40])
             + (" …" if len(k.ops) > 40 else "") + "\n")
    if k.sources:
        t.append("source lines: ", style=HEAD)
        t.append(visible_line(k.sources) + "\n", style=styling.S_FILE)
    if k.members:
        t.append("members: ", style=HEAD)
        t.append(", ".join(visible_line(m) for m in k.members[:30]) + (" …" if len(k.members) > 30 else "") + "\n",
                 style=DIM)
    return t


def rerun_table(rows, notes=(), error: Optional[str] = None) -> Text:
    """Return the executor comparison of a re-run (stored or fresh)."""
    t = Text()
    if error:
        t.append(f"re-run failed: {visible(capped(error))}\n", style=Style(color=BAD, bold=True))
    for n in notes:
        t.append(f"note: {visible_line(n)}\n", style=DIM)
    if not rows:
        return t
    t.append(f"{'executor':<10} {'status':<12} {'median':>10} {'max abs err':>12} {'max rel err':>12}\n", style=HEAD)
    for ex, status, median, abs_err, rel_err, detail in rows:
        colour = OK if status == "ok" else DIM if status == "unavailable" else BAD
        med, ae, re_ = format_us(median), format_error(abs_err), format_error(rel_err)
        t.append(f"{visible_line(ex):<10} ")
        t.append(f"{visible_line(status):<12} ", style=Style(color=colour))
        t.append(f"{med:>10} {ae:>12} {re_:>12}\n")
        if status != "ok" and detail:
            t.append(f"           {visible_line(detail)[:200]}\n", style=DIM)
    return t


def topbar(ov: ViewOverview, group: Optional[Text] = None) -> Text:
    """Return the top bar: script, run status, graphs and kernels, eager and fallback counts;
    ``group`` (the group, the rank shown, ...) goes first when the recording is a group's rank."""
    r = ov.run
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("thundervis ", style=Style(bold=True, color="#e5c07b"))
    if group is not None:
        t.append_text(group)
        t.append(" │ ", style=DIM)
    t.append(visible_line(os.path.basename(r.target)), style=Style(bold=True))
    colour = OK if r.status == "ok" else WARN if r.status == "running" else BAD
    t.append("  ")
    t.append(visible_line(r.status), style=Style(color=colour, bold=True))
    t.append(f"  {plural(len(ov.graphs), 'graph')} · {plural(len(ov.kernels), 'kernel')}",
             style=Style(dim=True))
    eager = ov.eager_counts()[0]
    fell = sum(1 for k in ov.kernels if k.fallback)
    if eager:
        t.append(f" · {eager} eager", style=Style(color=BAD))
    if fell:
        t.append(f" · {fell} fell back", style=Style(color=WARN))
    skipped = eager_short(ov.eager_regions)
    if skipped:
        t.append(f" · {skipped}", style=Style(color=BAD))
    if ov.compiled_share is not None and ov.compiled_share.short:  # present.compiled_share's words
        t.append(f" · {ov.compiled_share.short}", style=DIM)
    cached = run_cache_text({ct.graph: ct for ct in ov.compile_times})  # present.compile_times' words
    if cached:
        t.append(f" · {cached}", style=DIM)
    if ov.collectives_between:
        t.append(f" · comm {ov.collectives_between} between graphs", style=Style(color=styling.COMM))
    return t


def banner(r) -> Optional[Text]:
    """Return the banner of a run that failed, was interrupted or killed (None otherwise), in
    present.run_status's words."""
    from thundervis.present.run_status import run_status
    ended = run_status(r, 1).ended
    if not ended:
        return None
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(visible_line(ended), style=Style(bold=True))
    t.append("  — t: traceback", style=Style(dim=True))
    return t


def trace_title(p, diff: bool, base: Optional[int], side: bool, counts: Optional[dict]) -> Text:
    """Return the trace pane's title line for pass ``p`` (a ``PassInfo`` or None): graph, chain,
    pass; with a ``diff`` its ``base`` pass and change ``counts``, else time and symbol count."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if p is None:
        return t
    t.append(f"g{p.graph} {visible_line(p.chain)} ", style=Style(dim=True))
    t.append(f"{p.index} {visible_line(p.name)}", style=Style(bold=True, color="#e5c07b"))
    if diff:
        if base is None:
            t.append("  diff: no earlier pass", style=Style(color=WARN))
        else:
            t.append(f"  vs {base}", style=Style(color="#56b6c2", bold=True))
            t.append(" side by side" if side else "", style=Style(color="#56b6c2"))
            if counts is not None:
                bits = [f"{v} {k}" for k, v in counts.items() if v and k != "unchanged"]
                t.append(("  " + ", ".join(bits)) if bits else "  no change", style=Style(dim=True))
    else:
        t.append(f"  {format_ms(p.duration_ms)} · {plural(p.n_symbols, 'symbol')}", style=Style(dim=True))
        if not p.changed:
            t.append(" · changed nothing", style=Style(dim=True))
    return t
