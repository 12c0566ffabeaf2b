"""``thundervis numerics REC [--json] [--flagged]``: the kernels ``run --check-numerics`` checked,
with their error against float64, eager float32's error on the same inputs, the ratio and the
verdict; ends with ``N flagged``. ``run --compare-eager`` deltas per chain follow when recorded.
A group folder (``run --nproc-per-node``, every rank checks its own kernels): one line per rank
and the totals, or ``--rank R``'s table.
"""
from __future__ import annotations

import sys

from thundervis.commands.read_options import add_recording_arguments
from thundervis.errors import UserError
from thundervis.safe_text import json_text, visible
from thundervis.present.units import plural


def cmd_numerics(args) -> int:
    """Print the numerics table of the recording ``args.recording`` (of a group folder: one line
    per rank, or rank ``args.rank``'s table); exit 2 when it holds none."""
    from thundervis.commands.ls import readable
    from thundervis.present.numerics import numerics_summary, summary_lines
    from thundervis.recording import is_group
    rank = getattr(args, "rank", None)
    if rank is None and is_group(args.recording):
        return _group_numerics(args)
    with readable(args.recording, rank) as rec:
        summary = numerics_summary(rec)
    if not summary.rows and not summary.eager:
        raise UserError(f"{args.recording} holds no numerics checks; record them with "
                        "thundervis run --check-numerics (or --compare-eager).")
    if args.json:
        sys.stdout.write(json_text(summary.as_json(), indent=2) + "\n")
        return 0
    sys.stdout.write(visible("\n".join(summary_lines(summary, flagged_only=args.flagged)) + "\n"))
    return 0


def _group_numerics(args) -> int:
    """Print one line per rank of the group folder ``args.recording`` (kernels checked, flagged,
    the flagged kernels' names) and the totals; ``--json``: each rank's summary."""
    from thundervis.present.numerics import numerics_summary
    from thundervis.recording import RecordingError
    from thundervis.recording import open_group
    per_rank = []
    try:  # the group is opened (its folder listed) once, each rank once: linear in the ranks
        group = open_group(args.recording)
        for r in group.ranks():
            rec = group.open_rank(r, check=False)  # a whole-file check per rank reads the whole group
            try:
                with rec.snapshot():  # one read lock for the rank's queries, not one per query
                    per_rank.append((r, numerics_summary(rec)))
            finally:
                rec.close()
    except RecordingError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    if not any(s.rows or s.eager for _, s in per_rank):
        raise UserError(f"no rank of {args.recording} holds numerics checks; record them with "
                        "thundervis run --nproc-per-node N --check-numerics (or --compare-eager).")
    checked, flagged = sum(s.checked for _, s in per_rank), sum(s.flagged for _, s in per_rank)
    if args.json:
        doc = {"ranks": [{"rank": r, **s.as_json()} for r, s in per_rank], "checked": checked, "flagged": flagged}
        sys.stdout.write(json_text(doc, indent=2) + "\n")
        return 0
    lines = []
    for r, s in per_rank:
        if args.flagged and not s.flagged:
            continue
        names = [row.kernel for row in s.rows if row.verdict == "flagged"]
        shown = f": {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}" if names else ""
        lines.append(f"rank {r:<5} {plural(s.checked, 'kernel')} checked · {s.flagged} flagged{shown}")
    lines.append(f"thundervis numerics {args.recording} --rank R lists one rank's kernels")
    lines.append(f"{plural(len(per_rank), 'rank')} · {plural(checked, 'kernel')} checked · {flagged} flagged")
    sys.stdout.write(visible("\n".join(lines) + "\n"))
    return 0


def register(subparsers) -> None:
    """Add the ``numerics`` subcommand."""
    p = subparsers.add_parser("numerics", help="kernels checked by run --check-numerics, with verdicts")
    add_recording_arguments(p)
    p.add_argument("--flagged", action="store_true", help="list only the flagged kernels")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_numerics)
