"""``thundervis ls GROUP [--json]``: every rank of a multi-process run in one summary (no subcommand
of its own; ``ls`` hands a group folder without ``--rank`` over to :func:`cmd_ls_group`)."""
from __future__ import annotations

import shlex
import sys

from thundervis.errors import UserError
from thundervis.recording import rank_ranges
from thundervis.present.group_ls_view import group_ls_view
from thundervis.safe_text import json_text, visible, visible_line
from thundervis.present.units import plural

MAX_RANK_LINES = 64


def group_text(ov) -> str:
    """Return the human-readable summary of a ``GroupOverview`` (present's ``GroupLsView`` of it,
    laid out by :func:`view_text`)."""
    return view_text(group_ls_view(ov))


def view_text(v) -> str:
    """Return the text ``ls GROUP`` prints for ``v`` (``present.group_ls_view.GroupLsView``: the
    value ``ls GROUP --json`` dumps)."""
    ov = v.overview
    lines = []
    target = next((" ".join(l.target) for l in ov.launches if l.target), "")
    world = ov.world_size or len(ov.ranks)
    lines.append(f"group   {target}".rstrip())
    lines.append(f"status  {ov.status} · {plural(world, 'rank')} · {plural(len(ov.ranks), 'recording')}")
    for l in ov.launches:
        code = f" (exit {l.exit_code})" if l.exit_code is not None else ""
        fails = "; ".join(
            (f"rank {f['rank']} exit {f.get('exit_code')}" + (f" ({f['signal']})" if f.get("signal") else ""))
            if f.get("rank") is not None else str(f.get("error"))
            for f in l.failures[:8])
        lines.append(f"launch  node {l.node_rank} on {l.host or '?'}: torchrun {shlex.join(l.torchrun_args)} · "
                     f"{l.status}{code}" + (f": {fails}" if fails else ""))
    lines.append(f"{'rank':>5}  {'status':<12} {'host':<14} {'pid':>7} {'graphs':>6} {'passes':>6} "
                 f"{'kernels':>7} {'comm in/between':>15}  traces")
    shown = v.ranks if len(v.ranks) <= MAX_RANK_LINES else v.ranks[:MAX_RANK_LINES]
    for row in shown:
        r = row.summary
        if r.error:
            lines.append(f"{r.rank:>5}  unreadable: {visible_line(r.error)}")
            continue
        label = f"{row.variant} " if row.variant else ""
        trace = label + (r.fingerprint or "-") + (f" (= rank {row.same_as})" if row.same_as is not None else "")
        code = f" {r.exit_code}" if r.exit_code not in (None, 0) else ""
        lines.append(f"{r.rank:>5}  {(r.status or '?') + code:<12} {(r.host or '?')[:14]:<14} {r.pid or 0:>7} "
                     f"{r.n_graphs:>6} {r.n_passes:>6} {r.n_kernels:>7} "
                     f"{f'{r.n_communication}/{r.n_collectives_between}':>15}  {trace}")
        for m in r.missing:
            lines.append(f"       missing: {m}")
    if len(ov.ranks) > len(shown):
        lines.append(f"       ... {plural(len(ov.ranks) - len(shown), 'more rank')} (thundervis ls GROUP --json lists all)")
    if ov.absent:
        lines.append(f"absent  ranks {rank_ranges(ov.absent)}: no recording (the worker never started recording)")
    if any(r.n_communication or r.n_collectives_between for r in ov.ranks):
        lines.append("comm    in: communication ops in the compiled traces; between: collectives run eagerly "
                     "between compiled graphs (DDP's reducer, FSDP2's hooks, the script's own), counted over the run")
    if len(ov.variants) <= 1:
        lines.append("traces  identical on every rank" if ov.variants else "traces  none recorded")
    else:
        labels = v.variant_labels
        parts = [f"{labels[fp]} ({fp}) on ranks {rank_ranges(rs)}"
                 for fp, rs in sorted(ov.variants.items(), key=lambda kv: (min(kv[1]), kv[0]))]
        lines.append(f"traces  differ between ranks: {len(ov.variants)} variants: " + "; ".join(parts))
        lines.append("        see where: thundervis diff --ranks GROUP")
    return visible("\n".join(lines) + "\n")


def cmd_ls_group(args) -> int:
    """Print the summary of the group folder ``args.recording`` (JSON with ``--json``)."""
    from thundervis.recording import RecordingError
    from thundervis.recording import open_group
    try:
        ov = open_group(args.recording).overview()
    except RecordingError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    view = group_ls_view(ov)  # present's one value: dumped as JSON, or laid out as text
    sys.stdout.write(json_text(view.as_json(), indent=2) + "\n" if args.json else view_text(view))  # made safe there
    return 0
