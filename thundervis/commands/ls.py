"""``thundervis ls REC [--json]``: what a recording holds (run, graphs, chains, passes, fusions).

Both forms are present's one value (``present.ls_view.LsView``): ``--json`` dumps it (stable,
documented in docs/recording.md; :func:`summary_dict`), the text lays it out (:func:`view_text`;
:func:`summary_text`, which ``thundervis run`` also prints).
"""
from __future__ import annotations

import contextlib
import sys

from thundervis.commands.read_options import add_recording_arguments, rank_of_a_recording
from thundervis.errors import UserError
from thundervis.present.units import format_ms, format_us, plural, plural_word
from thundervis.safe_text import json_text, visible, visible_line


def open_or_fail(path: str, rank=None):
    """Open the recording at ``path`` (a group folder: the recording of ``rank``, default the
    first rank as every view picks it, ``present.ranks.first_rank``); a RecordingError becomes a
    UserError (exit 2)."""
    from thundervis.present.errors import DataError
    from thundervis.present.ranks import first_rank
    from thundervis.recording import RecordingError, open_recording
    from thundervis.recording import is_group, open_group
    try:
        if is_group(path):
            group = open_group(path)
            try:
                # a named rank needs no overview (which opens every rank: N ranks, N² opens)
                return group.open_rank(rank if rank is not None else first_rank(group.overview()))
            except DataError as e:
                raise UserError(str(e).rstrip(".") + ".") from None
        if rank is not None:
            raise rank_of_a_recording(path)
        return open_recording(path)
    except RecordingError as e:
        raise UserError(str(e).rstrip(".") + ".") from None


@contextlib.contextmanager
def readable(path: str, rank=None):
    """Open the recording at ``path`` (or ``rank``'s of a group folder) for the ``with`` body and
    close it after; a RecordingError, when opening or from any later read, becomes a UserError (one
    sentence, exit 2)."""
    from thundervis.recording import RecordingError
    rec = open_or_fail(path, rank)
    try:
        yield rec
    except RecordingError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    finally:
        rec.close()


def ls_view_or_fail(rec, gpus=None):
    """Return present's ``LsView`` of an open recording (the roofline model on ``gpus``, default the
    recorded targets); an unknown GPU name is a UserError (exit 2)."""
    from thundervis.gpus import UnknownGPU
    from thundervis.present.ls_view import ls_view
    try:
        return ls_view(rec, gpus)
    except UnknownGPU as e:
        raise UserError(str(e) + ".") from None


def summary_dict(rec, gpus=None) -> dict:
    """Return the ``ls --json`` document for an open recording: present's ``LsView.as_json()``
    (``present.ls_view``; docs/recording.md names every key)."""
    return ls_view_or_fail(rec, gpus).as_json()


def collective_lines(c, places_limit: int = 8) -> list[str]:
    """Return the text lines about communication of ``c`` (``present.ls_view.LsCollectives``; none
    when the run had none): ops in the traces, collectives run between graphs per op, and where
    they ran."""
    from thundervis.present.collectives import place_text
    from thundervis.present.units import format_size
    n = c.counts
    if not c.in_traces and not n.between_graphs:
        return []
    ops = ", ".join(f"{k} {op}" for op, k in sorted(n.by_op.items(), key=lambda kv: (-kv[1], kv[0])))
    total = sum(n.bytes_by_op.values())
    lines = [f"collectives  {plural(c.in_traces, 'communication op')} in the traces · {plural(n.between_graphs, 'collective')} "
             f"run between compiled graphs" + (f" ({ops}; {format_size(total)})" if ops else "")
             + ("" if n.complete else " so far")]
    for p in c.places[:places_limit]:
        lines.append("  " + visible_line(place_text(p)))
    if len(c.places) > places_limit:
        lines.append(f"  ... {len(c.places) - places_limit} more places (thundervis ls --json lists all)")
    if n.recorded:
        lines.append(f"  {n.recorded} listed one by one (the first steps): thundervis show REC --chain "
                     "CHAIN ends with those run next to that chain")
    return lines


def fallback_lines(d: dict, ops_limit: int = 12) -> list[str]:
    """Return the text lines about fallbacks of an ``ls --json`` document ``d``: how many chains
    ran eagerly (and how many functions Dynamo could not trace), the ``torch.compile`` options the
    run overrode, each eager chain, run-time kernel fallback, Dynamo recompile-limit fallback and
    function Dynamo could not trace with its source line and reason, then the ops torch
    runs grouped by reason (at most ``ops_limit`` groups). Recorded strings are made terminal-safe."""
    from thundervis.present.fallback_groups import torch_op_groups
    from thundervis.present.status import NOT_TRACED, TORCH_OP
    v = visible_line
    # present.eager_regions words the head and each region Dynamo left to eager (graph breaks and
    # functions it could not trace): a model that mostly ran eagerly never reads as compiled.
    lines = [d["eager_head"]] + [f"  {v(r['text'])}" for r in d.get("eager_regions", [])]
    if d.get("compiled_share"):  # present.compiled_share: by time and by ops, not by chains
        lines.append(v(d["compiled_share"]["text"]))
    if d.get("compile_options_not_used"):
        lines.append(f"torch.compile options not used: {v(', '.join(d['compile_options_not_used']))} "
                     f"(every graph compiles through thundervis; mode and options are Inductor's)")
    loud = [f for f in d["fallbacks"] if f["kind"] not in (TORCH_OP, NOT_TRACED)]  # NOT_TRACED: a region above
    for f in loud:
        where = f" · {v(f['source'])}" if f["source"] else ""
        chain = "" if f["graph"] is None else f"graph {f['graph']}{' ' + f['chain'] if f['chain'] else ''} · "
        lines.append(f"  fallback {f['kind']}: {chain}{v(f['what'])}{where}: {v(f['reason'])}")
    ops = [f for f in d["fallbacks"] if f["kind"] == TORCH_OP]
    if ops:
        groups = torch_op_groups((f["what"], f["reason"], f["source"]) for f in ops)  # present's grouping
        lines.append(f"{plural(len(ops), 'op')} run by torch (why not lowered / not fused):")
        for group in groups[:ops_limit]:
            syms = group.ops
            where = f" · {v(group.sources)}" if group.sources else ""
            lines.append(f"  {group.count:>3} × {v(', '.join(syms[:3]))}{' ...' if len(syms) > 3 else ''}: "
                         f"{v(group.reason)}{where}")
        if len(groups) > ops_limit:
            lines.append(f"  ... and {plural(len(groups) - ops_limit, 'more reason')} (thundervis ls --json lists all)")
    return lines


def summary_text(rec, passes: bool = True, gpus=None) -> str:
    """Return the human-readable summary of an open recording (``passes``: list every pass; ``gpus``:
    the GPUs the step is modelled on, default the recorded targets)."""
    return view_text(ls_view_or_fail(rec, gpus), passes)


def view_text(v, passes: bool = True) -> str:
    """Return the text ``ls`` prints for ``v`` (a ``present.ls_view.LsView``: the value ``ls --json``
    dumps); ``passes``: list every pass."""
    r = v.run
    lines = []
    took = f" · {format_ms(r.duration_s * 1e3)}" if r.duration_s is not None else ""
    target = r.script or f"-m {r.module}"
    lines.append(f"run     {target} {' '.join(str(a) for a in r.argv[1:])}".rstrip())
    lines.append(f"status  {v.run_status.text}{took} · torch {r.torch} · {r.device}")  # present.run_status
    if v.rank:  # one rank of a multi-process run (thundervis run --nproc-per-node)
        f = v.rank
        lines.append(f"rank    {f['rank']} of {f['world_size']} · local rank {f['local_rank']} "
                     f"· node {f['node_rank']}")
    if r.last_event:
        lines.append(f"        the process is gone; last recorded: {visible_line(r.last_event)}")
    if v.compile_text:
        lines.append(f"        {v.compile_text}")
    if v.run_status.no_graph:
        lines.append(v.run_status.no_graph)
    for g in v.graphs:
        lines += _graph_lines(g, passes)
    lines.extend(fallback_lines({"eager_head": v.eager_head, "eager_regions": [r.as_json() for r in v.eager_regions],
                                 "compiled_share": v.compiled_share.as_json(),
                                 "compile_options_not_used": list(v.compile_options_not_used),
                                 "fallbacks": [f.as_json() for f in v.fallbacks]}))
    lines.extend(collective_lines(v.collectives))
    lines.extend(s.text() for s in v.modelled_step)
    if v.memory_peak:
        lines.append(v.memory_peak["line"])
    lines.extend(v.abstract_lines)
    lines.extend(v.numerics_lines)
    return visible("\n".join(lines) + "\n")  # ls and run's end summary: recorded strings made safe


def _graph_lines(lg, passes: bool) -> list[str]:
    """Return the lines of one ``present.ls_view.LsGraph``: compile time and reason, chains (and
    their passes when ``passes``), fusions, failures."""
    g = lg.graph
    lines = []
    reason = f" · {g.reason}" if g.reason else ""
    lines.append(f"graph {g.id}  {lg.compile.text}{reason}")  # present.compile_times: forward + backward
    # The whole graph-break reason (Dynamo's explanation and hints), indented under the graph;
    # its first line is the graph's reason already.
    gb = [ln.rstrip() for ln in (g.graph_break_reason or "").splitlines() if ln.strip()]
    lines += [f"         {visible_line(ln)}" for ln in gb[1 if gb and g.reason and g.reason.endswith(gb[0]) else 0:]]
    for lc in lg.chains:
        c = lc.chain
        shown = [p.as_json() for p in c.passes]  # the passes as ls --json has them (ms rounded there)
        err = f": {visible_line(c.error)}" if c.error else ""
        # with the compile cache on: the chain's compile time and whether it came from the cache
        cached = f" · {lg.compile.chain_text(c.kind)}" if lg.compile.chain_from_cache(c.kind) is not None else ""
        lines.append(f"  {c.kind:<10} {c.status}{err} · {plural(len(shown), 'pass', 'passes')} · "
                     f"{format_ms(sum(p['ms'] for p in shown))}{cached}")
        if lc.timed:
            lines.append(f"  {'':<10} timed · {lc.timed}")
        if passes:
            for p in shown:
                mark = "changed" if p["changed"] else "-"
                cache = "  from cache" if lg.compile.pass_from_cache(c.kind, p["name"]) else ""
                lines.append(f"    {p['index']:>2} {p['name']:<12} {format_ms(p['ms']):>10}  {mark:<7} "
                             f"{p['n_symbols']:>5} {plural_word(p['n_symbols'], 'symbol')}{cache}")
    for f in lg.fusions:
        k, t = f.kernel, f.kernel.timing  # run --profile: its median over the timed calls (the chain's line says which clock)
        fold = f.fold  # present.kernel_folds: a repeated layer's kernels are one line, at the first's place
        if fold is not None and fold["folded"]:
            if k.id == fold["opens"]:
                timed = f" · {fold['median']} median, all {fold['count']}" if fold.get("calls") else ""
                layers = f" · {fold['layers']}" if fold["layers"] else ""
                lines.append(f"  fusion {fold['row_label']} {k.chain}{layers} · {plural(k.n_ops, 'op')} each{timed}"
                             f" · {f.row.sources_cell}")
            continue
        checked = f" · numerics {f.numerics}" if f.numerics else ""
        timed = f" · {format_us(t.median_us)} median" if t is not None and t.calls else ""
        # the kernel table's cell (present.kernel_rows): file:12, 14, 20
        lines.append(f"  fusion {f.row.label} {k.chain} · {plural(k.n_ops, 'op')}{timed}{checked} · {f.row.sources_cell}")
        builds = {t: x for t, x in f.targets.items() if "status" in x}  # AOT builds only
        if builds:
            from thundervis.present.asm import target_line
            lines.append(f"         {target_line(builds)}")
    for x in g.failures:
        lines.append(f"  failed {x.chain or 'graph'}: {visible_line((x.error.splitlines() or [''])[0])}")
    return lines


def group_summary_text(ov) -> str:
    """Return the human-readable summary of a group (a ``GroupOverview``): one line per rank,
    whether the ranks compiled identical traces, failures."""
    from thundervis.commands.ls_group import group_text
    return group_text(ov)


def cmd_ls(args) -> int:
    """Print the summary of the recording ``args.recording`` (JSON with ``--json``); a group folder
    without ``--rank``: every rank's summary."""
    from thundervis.recording import is_group
    if is_group(args.recording) and args.rank is None:
        from thundervis.commands.ls_group import cmd_ls_group
        return cmd_ls_group(args)
    with readable(args.recording, args.rank) as rec:
        gpus = [x for x in (args.gpu or "").split(",") if x.strip()] or None
        # strings from the recording: control characters made visible (escaped, in JSON)
        view = ls_view_or_fail(rec, gpus)  # present's one value: dumped as JSON, or laid out as text
        text = (json_text(view.as_json(), indent=2) + "\n") if args.json else view_text(view, not args.brief)
    sys.stdout.write(text)
    return 0


def register(subparsers) -> None:
    """Add the ``ls`` subcommand."""
    p = subparsers.add_parser("ls", help="summarize a recording: run, graphs, chains, passes, fusions")
    add_recording_arguments(p, "in a group folder: summarize this rank's recording")
    p.add_argument("--json", action="store_true", help="print the stable JSON form (see docs/recording.md)")
    p.add_argument("--brief", action="store_true", help="do not list every pass")
    p.add_argument("--gpu", metavar="LIST", default=None,
                   help="model the step on these GPUs, e.g. sm_80,h200 (default: the run's targets, else sm_90; "
                        "docs/targets.md lists the table)")
    p.set_defaults(func=cmd_ls)
