"""``thundervis dot REC [--graph G] [--chain C] [--pass P] [--collapse] [--module M] [--blocks |
--flat] [--expand BLOCK ...] -o OUT``: the fusion diagram of one recorded trace, written as SVG,
PNG, PDF or DOT (by OUT's suffix); a model with repeated blocks is drawn one box per block."""
from __future__ import annotations

from thundervis.commands.read_options import add_pass_command
from thundervis.errors import UserError, as_user_errors, writing


def timings_for(rec, graph: int, chain: str) -> dict:
    """Return ``{uid or kernel name: median µs}`` for one chain (empty when not profiled)."""
    out: dict = {}
    for k in rec.timings().for_chain(graph, chain):
        if k.uid:
            out[k.uid] = k.median_us
        if k.kind == "fusion":
            out[k.name] = k.median_us
    return out


def collectives_between(rec, graph: int, chain: str) -> dict:
    """Return ``{"before": [lines], "after": [lines]}``: the collectives run eagerly right before
    and right after the first call of the chain (recording.collectives), one line each."""
    from thundervis.present.collectives import describe
    from thundervis.present.collectives import first_call_collectives
    before, after = first_call_collectives(rec, graph, chain)
    return {"before": [describe(r) for r in before], "after": [describe(r) for r in after]}


def cmd_dot(args) -> int:
    """Write the diagram of the chosen trace."""
    from thundervis import dot
    from thundervis.commands.ls import open_or_fail
    from thundervis.commands.read_options import selection
    from thundervis.recording import RecordingError
    fmt = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
    if fmt not in dot.FORMATS:
        raise UserError(f"cannot tell the diagram format from {args.out!r}: name it .svg, .png, .pdf or .dot.")
    rec = open_or_fail(args.recording, args.rank)
    try:
        chosen = selection(rec, args.graph, args.chain, args.pass_)  # present.selection
        g, c, p = chosen.graph, chosen.chain, chosen.pass_
        try:
            trace = rec.pass_trace(g.id, c.kind, p.index)
        except RecordingError as e:
            raise UserError(str(e)) from None
        timings = timings_for(rec, g.id, c.kind)
        between = collectives_between(rec, g.id, c.kind)
    finally:
        rec.close()
    try:
        blocks = True if args.blocks else (False if args.flat else None)
        source = dot.trace_to_dot(trace, collapse=args.collapse, module=args.module, timings=timings,
                                  between=between, blocks=blocks, expand=args.expand,
                                  title=f"graph {g.id} · {c.kind} · after {p.index} {p.name}"
                                        + (f" · module {args.module}" if args.module else ""))
    except ValueError as e:
        raise UserError(str(e) + ".") from None
    with as_user_errors(dot.RenderError), writing(args.out):
        dot.write_diagram(source, args.out)
    print(f"thundervis: diagram written to {args.out}")
    return 0


def register(subparsers) -> None:
    """Add the ``dot`` subcommand."""
    p = add_pass_command(subparsers, "dot", "draw the dataflow graph of a trace with its fusions (Graphviz)", "draw")
    p.add_argument("--collapse", action="store_true", help="draw each fusion as one node")
    p.add_argument("--module", "-m", default=None, metavar="M",
                   help="only symbols from this module path (e.g. model.layers.0) and their inputs")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--blocks", action="store_true",
                       help="one box per module block (model.layers.3) even for a small model (default: "
                            "when the trace repeats 3 or more numbered blocks)")
    group.add_argument("--flat", action="store_true", help="draw every op, without module blocks")
    p.add_argument("--expand", "-e", action="append", default=None, metavar="BLOCK",
                   help="draw this block's ops (e.g. model.layers.3; model.layers: every layer; '*': all); repeatable")
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="output file: .svg, .png, .pdf or .dot")
    p.set_defaults(func=cmd_dot)
