"""``thundervis numerics REC [--json] [--flagged]``: the kernels ``run --check-numerics`` checked,
with their error against float64, eager float32's error on the same inputs, the ratio and the
verdict; ends with ``N flagged``. ``run --compare-eager`` deltas per chain follow when recorded.
"""
from __future__ import annotations

import json
import sys

from thundervis.commands.read_options import add_recording_arguments
from thundervis.errors import UserError
from thundervis.safe_text import visible


def cmd_numerics(args) -> int:
    """Print the numerics table of the recording ``args.recording``; exit 2 when it holds none."""
    from thundervis.commands.ls import readable
    from thundervis.present.numerics import numerics_summary, summary_lines
    with readable(args.recording, getattr(args, "rank", None)) as rec:
        summary = numerics_summary(rec)
    if not summary.rows and not summary.eager:
        raise UserError(f"{args.recording} holds no numerics checks; record them with "
                        "thundervis run --check-numerics (or --compare-eager).")
    if args.json:
        text = json.dumps(summary.as_json(), indent=2) + "\n"
    else:
        text = "\n".join(summary_lines(summary, flagged_only=args.flagged)) + "\n"
    sys.stdout.write(visible(text))
    return 0


def register(subparsers) -> None:
    """Add the ``numerics`` subcommand."""
    p = subparsers.add_parser("numerics", help="kernels checked by run --check-numerics, with verdicts")
    add_recording_arguments(p)
    p.add_argument("--flagged", action="store_true", help="list only the flagged kernels")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_numerics)
