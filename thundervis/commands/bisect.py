"""``thundervis bisect REC [--graph G] --chain C [--inputs captured|random] [--json]``: run every
pass of a chain on the same inputs and name the first pass, and the first symbol in it, that
changes the numbers (see :mod:`thundervis.bisect`)."""
from __future__ import annotations

import sys

from thundervis.errors import UserError, sentence
from thundervis.safe_text import json_text, visible


def cmd_bisect(args) -> int:
    """Bisect ``args.chain`` of the recording; exit 0 (no divergence), 1 (a pass diverges), 2 (bad input)."""
    from thundervis.commands.ls import readable
    from thundervis.recording import UnknownItem
    with readable(args.recording, getattr(args, "rank", None)) as rec:
        from thundervis.compiler_api import BisectError, RerunError, bisect, report_lines
        try:
            report = bisect(rec, args.graph, args.chain, args.inputs, args.seed)
        except (BisectError, RerunError, UnknownItem) as e:
            raise UserError(sentence(e)) from None
    text = json_text(report.as_json(), indent=2, default=str) + "\n" if args.json else \
        visible("\n".join(report_lines(report)) + "\n")
    sys.stdout.write(text)
    return 1 if report.divergence is not None else 0


def register(subparsers) -> None:
    """Add the ``bisect`` subcommand."""
    p = subparsers.add_parser("bisect", help="find the pass and the symbol that change a chain's numbers")
    p.add_argument("recording", metavar="REC", help="a .tvrec recording (or a group folder: --rank)")
    p.add_argument("--graph", type=int, default=None, help="graph id (default: the first with the chain)")
    p.add_argument("--chain", required=True,
                   help="the chain whose passes are compared: forward, backward or inference")
    p.add_argument("--inputs", choices=("captured", "random"), default=None,
                   help="the chain's inputs captured by run --capture-inputs (default when recorded) or random ones")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    p.add_argument("--rank", type=int, default=None, help="in a group folder: this rank's recording")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_bisect)
