"""``thundervis asm REC KERNEL [--target sm_90] [--stage sass] [--source FILE:LINE]``: print one
compiled stage of a kernel built ahead of time (``run --target``), every line annotated with the
member op, its uid and the user's source line it came from. ``--source`` keeps only what that line
became; ``--json`` prints the rows. Reads through the reader and ``thundervis.present.asm``; no torch.
"""
from __future__ import annotations

import sys

from thundervis.errors import UserError
from thundervis.commands.ls import readable
from thundervis.commands.read_options import add_kernel_arguments
from thundervis.present.units import plural


def cmd_asm(args) -> int:
    """Print the annotated stage; one sentence and exit 2 for anything missing."""
    from thundervis.present.asm import (AsmUnavailable, annotated_text, asm_listing, build_text,
                                        parse_source_arg, rows_for_source)
    from thundervis.recording import UnknownItem
    from thundervis.safe_text import json_text, visible_line
    want = None
    if args.source is not None:
        try:
            want = parse_source_arg(args.source)
        except ValueError as e:
            raise UserError(f"{e}.") from None
    with readable(args.recording) as rec:
        try:
            kernel = rec.find_kernel(args.kernel, args.graph, args.chain)
        except UnknownItem as e:
            raise UserError(str(e).rstrip(".") + ".") from None
        try:
            listing = asm_listing(rec, kernel, args.target, args.stage)
        except AsmUnavailable as e:
            raise UserError(str(e).rstrip(".") + ".") from None
    rows = list(listing.rows) if want is None else rows_for_source(listing, *want)
    if want is not None and not rows:
        raise UserError(f"no {listing.stage} line of {visible_line(kernel.name)} came from "
                        f"{visible_line(args.source)}; its lines: {_lines_of(listing)}.")
    if args.json:
        d = listing.as_json()
        d["rows"] = [r.as_json() for r in rows]
        sys.stdout.write(json_text(d, indent=1) + "\n")
        return 0
    b = listing.build
    head = f"# {visible_line(kernel.name)} · {listing.target} · {listing.stage} · {build_text(b)}"
    if want is not None:
        head += f" · only what {visible_line(args.source)} became ({plural(len(rows), 'line')})"
    sys.stdout.write(head + "\n" + annotated_text(listing, rows))
    return 0


def _lines_of(listing) -> str:
    seen = sorted({r.where for r in listing.rows if r.where})
    return ", ".join(seen[:12]) + (" ..." if len(seen) > 12 else "") if seen else "none"


def register(subparsers) -> None:
    """Add the ``asm`` subcommand."""
    p = subparsers.add_parser("asm", help="print a kernel's compiled GPU code (run --target) annotated with source lines")
    add_kernel_arguments(p, "--target")
    p.add_argument("--target", "-t", default=None, help="GPU target, e.g. sm_90 (default: the first recorded)")
    p.add_argument("--stage", "-s", default="sass", choices=("ttir", "ttgir", "llir", "ptx", "sass"),
                   help="compiled stage to print (default: sass)")
    p.add_argument("--source", default=None, metavar="FILE:LINE",
                   help="keep only the lines that user source line became, e.g. train_gpt.py:52")
    p.add_argument("--graph", "-g", type=int, default=None, help="graph id (when several graphs have the kernel)")
    p.add_argument("--chain", "-c", default=None, help="forward, backward or inference")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_asm)
