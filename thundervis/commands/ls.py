"""``thundervis ls REC [--json]``: what a recording holds (run, graphs, chains, passes, fusions).

The ``--json`` form is stable (documented in docs/recording.md); :func:`summary_dict` builds it and
:func:`summary_text` the human form, which ``thundervis run`` also prints.
"""
from __future__ import annotations

import contextlib
import re
import sys

from thundervis.commands.read_options import add_recording_arguments, rank_of_a_recording
from thundervis.errors import UserError
from thundervis.present.kernel_rows import group_sources
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


def summary_dict(rec, gpus=None) -> dict:
    """Return the ``ls --json`` document for an open recording (``Overview.as_json()``), with each
    chain's ``timed`` line (``present.chain_times``; None when not profiled), the fallbacks: ``chains_eager``/``chains_total``, ``fallbacks``, each fusion's ``ran_in_torch``,
    ``ran_on`` (what ran it, ``present.status.KernelRun.as_json()``; None when not recorded), ``tag``
    and ``label`` (``fw_fusion_0 [triton · ran on cpu via torch]``), all from the kernel table
    (``present.kernel_rows.kernel_table``), and the roofline model (``modelled_step``, each fusion's
    ``roofline`` and ``targets.<sm>``) on the recorded targets or the GPUs ``gpus`` names."""
    from thundervis.present.chain_times import chain_time_text
    from thundervis.present.overview import read_overview
    from thundervis.present.status import chain_counts, compile_options_not_used, fallbacks
    view = read_overview(rec)  # the overview every view reads: the TUI's and the widget's too
    ov = view.overview
    d = ov.as_json()
    for graph, g in zip(ov.graphs, d["graphs"]):  # a profiled chain's time per call, as ls prints it
        times = {c.chain: c for c in graph.timings.chains}
        for c in g["chains"]:
            c["timed"] = chain_time_text(times.get(c["kind"]))
    rows = {r.id: r for r in view.kernels}
    from thundervis.present.asm import target_summaries
    targets = target_summaries(rec)  # per GPU target compiled ahead of time (run --target)
    for g in d["graphs"]:
        for k in g["fusions"]:
            row = rows[k["id"]]
            k["ran_in_torch"] = row.fallback
            k["ran_on"] = row.run.as_json() if row.run is not None else None
            k["tag"], k["label"], k["sources_cell"] = row.tag, row.label, row.sources_cell
            k["targets"] = targets.get((g["id"], k["chain"], k["name"]), {})
    d["chains_eager"], d["chains_total"] = chain_counts(rec)
    d["run_status"] = view.run_status.as_json()  # how views word the run's end
    from thundervis.present.compile_times import compile_times, run_compile_text
    times = compile_times(ov.graphs, rec.events("chain_compiled"))  # forward + the lazy backward
    for g in d["graphs"]:
        g["compile"] = times[g["id"]].as_json()
    d["compile_text"] = run_compile_text(times)
    d["compile_options_not_used"] = compile_options_not_used(rec.events("compile_options_dropped"))
    d["fallbacks"] = [f.as_json() for f in fallbacks(rec)]
    from thundervis.present.eager_regions import EVENTS, eager_head, eager_regions
    regions = eager_regions([e for name in EVENTS for e in rec.events(name)])
    d["eager_regions"] = [r.as_json() for r in regions]  # code Dynamo left to eager (present.eager_regions)
    d["eager_head"] = eager_head(d["chains_eager"], d["chains_total"], regions)
    d["collectives"] = collectives_dict(rec)
    add_roofline(d, rec, gpus)
    numerics = view.numerics
    d["numerics"] = numerics.as_json()
    from thundervis.present.numerics import ls_lines
    d["numerics_lines"] = ls_lines(numerics)  # ls's text: the overview's summary, not a second reading
    add_memory(d, rec)
    from thundervis.present.abstract_fit import abstract_answer
    answer = abstract_answer(rec, gpus)  # an abstract run's fit and step per GPU (None: a real run)
    d["abstract"] = answer.as_json() if answer is not None else None
    d["abstract_lines"] = answer.text_lines() if answer is not None else []
    for g in d["graphs"]:
        for k in g["fusions"]:
            row = numerics.verdict_of(g["id"], k["chain"], k["name"])
            k["numerics"] = None if row is None or row.verdict == "not checked" else row.verdict
    return d


def add_memory(d: dict, rec) -> None:
    """Merge the memory ledger into the ``ls --json`` document ``d``: top-level ``saved_bytes`` (per
    step, counted like ``saved_tensors_hooks``; None when not recorded) and per chain
    ``saved_bytes``, ``saved``, ``peak_bytes`` and ``measured_peak_bytes`` (``present.memory``); top-level
    ``memory_peak``: the step's static and measured peaks and how far apart (None when not recorded)."""
    from thundervis.present.memory import step_memory
    d["saved_bytes"], per_chain, d["memory_peak"] = step_memory(rec)
    for g in d["graphs"]:
        for c in g["chains"]:
            m = per_chain.get((g["id"], c["kind"]))
            c["saved_bytes"] = m["saved_bytes"] if m else None
            c["saved"] = m["saved"] if m else []
            c["peak_bytes"] = m["peak_bytes"] if m else None
            c["measured_peak_bytes"] = m.get("measured_peak_bytes") if m else None


def add_roofline(d: dict, rec, gpus=None) -> None:
    """Merge the roofline model into the ``ls --json`` document ``d``: ``modelled_step.<target>``,
    ``roofline`` (a row per kernel and torch matmul/attention/convolution on the first target), and
    per fusion ``roofline`` (bytes, FLOPs) and ``targets.<target>.roofline_us`` (merged beside
    what other per-target producers put there). An unknown GPU name is a UserError."""
    from thundervis.gpus import UnknownGPU
    from thundervis.present.roofline import chain_costs, fusion_model, fusion_targets, roofline_rows, step_models
    try:
        costs = chain_costs(rec)
        d["modelled_step"] = {s.target: s.as_json() for s in step_models(rec, gpus, costs)}
        d["roofline"] = [r.as_json() for r in roofline_rows(rec, (gpus or [None])[0], costs)]
        per_target, model = fusion_targets(rec, costs, gpus), fusion_model(costs)
    except UnknownGPU as e:
        raise UserError(str(e) + ".") from None
    for g in d["graphs"]:
        for k in g["fusions"]:
            key = (g["id"], k["chain"], k["uid"])
            k["roofline"] = model.get(key)
            for target, values in per_target.get(key, {}).items():
                k.setdefault("targets", {}).setdefault(target, {}).update(values)


def collectives_dict(rec) -> dict:
    """Return the ``collectives`` part of ``ls --json``: ``in_traces`` (communication ops in the
    compiled traces), the run-time counts of those run between graphs (``between_graphs``,
    ``by_op`` ...) and ``places`` (where they ran, with counts)."""
    from thundervis.present.collectives import collective_counts, collective_places, trace_communication_ops
    d = {"in_traces": trace_communication_ops(rec), **collective_counts(rec).as_json()}
    d["places"] = [p.as_json() for p in collective_places(rec)]
    return d


def collective_lines(d: dict, places_limit: int = 8) -> list[str]:
    """Return the text lines about communication of an ``ls --json`` document ``d`` (none when the
    run had none): ops in the traces, collectives run between graphs per op, and where they ran."""
    from thundervis.present.collectives import place_text
    from thundervis.present.units import format_size
    from thundervis.present.collectives import CollectivePlace
    c = d.get("collectives") or {}
    if not c.get("in_traces") and not c.get("between_graphs"):
        return []
    ops = ", ".join(f"{n} {op}" for op, n in sorted(c["by_op"].items(), key=lambda kv: (-kv[1], kv[0])))
    total = sum(c["bytes_by_op"].values())
    lines = [f"collectives  {plural(c['in_traces'], 'communication op')} in the traces · {plural(c['between_graphs'], 'collective')} "
             f"run between compiled graphs" + (f" ({ops}; {format_size(total)})" if ops else "")
             + ("" if c["complete"] else " so far")]
    for p in c["places"][:places_limit]:
        side = lambda v: None if v is None else (v["graph"], v["chain"])  # noqa: E731
        lines.append("  " + visible_line(place_text(CollectivePlace(side(p["after"]), side(p["before"]), p["op"],
                                                                    p["count"], p["bytes"]))))
    if len(c["places"]) > places_limit:
        lines.append(f"  ... {len(c['places']) - places_limit} more places (thundervis ls --json lists all)")
    if c["recorded"]:
        lines.append(f"  {c['recorded']} listed one by one (the first steps): thundervis show REC --chain "
                     "CHAIN ends with those run next to that chain")
    return lines


# A list of sizes or dims in a reason ("of a [16, 7, 32] tensor", "dims [1]").
_SIZE_LIST = re.compile(r"\[\d+(?:, \d+)*\]")


def _common_sizes(reasons: list) -> str:
    """Return the reason of a group (texts equal but for their size lists): each size list that is
    the same in all of them as it is, the others as ``[…]``."""
    lists = [_SIZE_LIST.findall(r) for r in reasons]
    parts = iter([ls[0] if len(set(ls)) == 1 else "[…]" for ls in zip(*lists)])
    return _SIZE_LIST.sub(lambda m: next(parts), reasons[0])


def fallback_lines(d: dict, ops_limit: int = 12) -> list[str]:
    """Return the text lines about fallbacks of an ``ls --json`` document ``d``: how many chains
    ran eagerly (and how many functions Dynamo could not trace), the ``torch.compile`` options the
    run overrode, each eager chain, run-time kernel fallback, Dynamo recompile-limit fallback and
    function Dynamo could not trace with its source line and reason, then the ops torch
    runs grouped by reason (at most ``ops_limit`` groups). Recorded strings are made terminal-safe."""
    from thundervis.present.source_view import op_name
    from thundervis.present.status import NOT_TRACED, TORCH_OP
    v = visible_line
    # present.eager_regions words the head and each region Dynamo left to eager (graph breaks and
    # functions it could not trace): a model that mostly ran eagerly never reads as compiled.
    lines = [d["eager_head"]] + [f"  {v(r['text'])}" for r in d.get("eager_regions", [])]
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
        # Reasons that differ only in sizes are one reason (a graph recompiled for each batch size
        # repeats every reason with its own shapes); the sizes show where they are all the same.
        groups: dict[str, list] = {}
        for f in ops:
            groups.setdefault(_SIZE_LIST.sub("[…]", f["reason"]), []).append(f)
        lines.append(f"{plural(len(ops), 'op')} run by torch (why not lowered / not fused):")
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        for reason, items in ordered[:ops_limit]:
            reason = _common_sizes([f["reason"] for f in items])
            syms = sorted({op_name(f["what"]) for f in items})
            srcs = group_sources([f["source"] for f in items if f["source"]], limit=6)
            where = f" · {v(srcs)}" if srcs else ""
            lines.append(f"  {len(items):>3} × {v(', '.join(syms[:3]))}{' ...' if len(syms) > 3 else ''}: "
                         f"{v(reason)}{where}")
        if len(ordered) > ops_limit:
            lines.append(f"  ... and {plural(len(ordered) - ops_limit, 'more reason')} (thundervis ls --json lists all)")
    return lines


def modelled_step_lines(d: dict) -> list[str]:
    """Return the ``modelled step`` lines of an ``ls --json`` document ``d``: one per target."""
    from thundervis.present.roofline import StepModel
    out = []
    for target, m in (d.get("modelled_step") or {}).items():
        chains = tuple((c["graph"], c["chain"], c["us"]) for c in m["chains"])
        left_out = tuple((x["graph"], x["chain"], x["why"]) for x in m.get("left_out", []))
        out.append(StepModel(target, m["gpu"], m["us"], chains, m["kernels"], m["torch_ops"], m["assumed"],
                             left_out, m.get("assumed_why") or "").text())
    return out


def numerics_lines(rec) -> list[str]:
    """Return the ``run --check-numerics`` / ``--compare-eager`` lines of a summary (none when the
    run was not checked)."""
    from thundervis.present.numerics import ls_lines, numerics_summary
    return ls_lines(numerics_summary(rec))


def summary_text(rec, passes: bool = True, gpus=None) -> str:
    """Return the human-readable summary of an open recording (``passes``: list every pass; ``gpus``:
    the GPUs the step is modelled on, default the recorded targets)."""
    d = summary_dict(rec, gpus)
    r = d["run"]
    lines = []
    took = f" · {format_ms(r['duration_s'] * 1e3)}" if r["duration_s"] is not None else ""
    target = r["script"] or f"-m {r['module']}"
    lines.append(f"run     {target} {' '.join(str(a) for a in r['argv'][1:])}".rstrip())
    lines.append(f"status  {d['run_status']['text']}{took} · torch {r['torch']} · {r['device']}")  # present.run_status
    ranks = [e.data for e in rec.events("distributed") if isinstance(e.data, dict)]
    if ranks:  # one rank of a multi-process run (thundervis run --nproc-per-node)
        f = ranks[-1]
        lines.append(f"rank    {f.get('rank')} of {f.get('world_size')} · local rank {f.get('local_rank')} "
                     f"· node {f.get('node_rank')}")
    if r.get("last_event"):
        lines.append(f"        the process is gone; last recorded: {visible_line(r['last_event'])}")
    if d.get("compile_text"):
        lines.append(f"        {d['compile_text']}")
    if d["run_status"]["no_graph"]:
        lines.append(d["run_status"]["no_graph"])
    for g in d["graphs"]:
        ms = g["compile"]["text"]  # present.compile_times: forward + backward, each part
        reason = f" · {g['reason']}" if g["reason"] else ""
        lines.append(f"graph {g['id']}  {ms}{reason}")
        # The whole graph-break reason (Dynamo's explanation and hints), indented under the graph;
        # its first line is the graph's reason already.
        gb = [ln.rstrip() for ln in (g.get("graph_break_reason") or "").splitlines() if ln.strip()]
        lines += [f"         {visible_line(ln)}" for ln in gb[1 if gb and g["reason"] and g["reason"].endswith(gb[0]) else 0:]]
        for c in g["chains"]:
            total = sum(p["ms"] for p in c["passes"])
            err = f": {visible_line(c['error'])}" if c["error"] else ""
            lines.append(f"  {c['kind']:<10} {c['status']}{err} · {plural(len(c['passes']), 'pass', 'passes')} · {format_ms(total)}")
            if c.get("timed"):
                lines.append(f"  {'':<10} timed · {c['timed']}")
            if passes:
                for p in c["passes"]:
                    mark = "changed" if p["changed"] else "-"
                    lines.append(f"    {p['index']:>2} {p['name']:<12} {format_ms(p['ms']):>10}  {mark:<7} "
                                 f"{p['n_symbols']:>5} {plural_word(p['n_symbols'], 'symbol')}")
        for k in g["fusions"]:
            src = k["sources_cell"]  # the kernel table's cell (present.kernel_rows): file:12, 14, 20
            checked = f" · numerics {k['numerics']}" if k.get("numerics") else ""
            t = k.get("timing")  # run --profile: its median over the timed calls (the chain's line says which clock)
            timed = f" · {format_us(t['median_us'])} median" if isinstance(t, dict) and t.get("calls") else ""
            lines.append(f"  fusion {k['label']} {k['chain']} · {plural(k['n_ops'], 'op')}{timed}{checked} · {src}")
            builds = {t: v for t, v in (k.get("targets") or {}).items() if "status" in v}  # AOT builds only
            if builds:
                from thundervis.present.asm import target_line
                lines.append(f"         {target_line(builds)}")
        for f in g["failures"]:
            lines.append(f"  failed {f['chain'] or 'graph'}: {visible_line((f['error'].splitlines() or [''])[0])}")
    lines.extend(fallback_lines(d))
    lines.extend(collective_lines(d))
    lines.extend(modelled_step_lines(d))
    if d.get("memory_peak"):
        lines.append(d["memory_peak"]["line"])
    lines.extend(d.get("abstract_lines") or [])
    lines.extend(d["numerics_lines"])
    return visible("\n".join(lines) + "\n")  # ls and run's end summary: recorded strings made safe


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
        text = (json_text(summary_dict(rec, gpus), indent=2) + "\n") if args.json else \
            visible(summary_text(rec, passes=not args.brief, gpus=gpus))
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
