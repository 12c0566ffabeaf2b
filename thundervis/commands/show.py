"""``thundervis show REC [--graph G] [--chain C] [--pass P] [--layer L] [--signature] [--unfold]``:
print one recorded trace.

Default: the last pass of the first graph's forward (or inference) chain. Repeated layers fold as
in the TUI (``present.trace_folds``: the first instance, then one line ``▸ model.layers.2–22 × 21
more: …``); ``--layer model.layers.5`` prints that instance in place. The signature and its
inputs' metadata fold as in the TUI too (``present.signature_fold``: one line, ``34 inputs ▸``);
``--signature`` prints them. ``--unfold`` prints every line.
Highlighted with rich when stdout is a terminal.
"""
from __future__ import annotations

import sys

from thundervis.errors import UserError
from thundervis.safe_text import visible
from thundervis.commands.ls import readable
from thundervis.commands.read_options import add_pass_command, selection


def collectives_comment(rec, graph: int, chain: str) -> str:
    """Return the comment block ``show`` prints under a trace: the collectives run eagerly right
    before and after the chain's calls (recording.collectives), or '' when none did."""
    from thundervis.present.collectives import chain_collective_lines
    from thundervis.safe_text import visible_line
    lines = chain_collective_lines(rec, graph, chain)
    return "".join(f"# {visible_line(line)}\n" for line in lines) if lines else ""


def cmd_show(args) -> int:
    """Print the trace of the chosen pass, with the note of every symbol that has one."""
    from thundervis.errors import sentence
    from thundervis.present.errors import DataError
    from thundervis.present.trace_folds import folded_text
    from thundervis.present.pass_traces import too_large_lines
    from thundervis.recording import RecordingError, TooLarge
    if args.layer and args.unfold:
        raise UserError("--unfold already prints every layer; give --layer or --unfold, not both.")
    if args.layer and args.no_source:
        raise UserError("--layer needs the source comments that name each op's layer; drop --no-source.")
    with readable(args.recording, args.rank) as rec:
        chosen = selection(rec, args.graph, args.chain, args.pass_)  # present.selection
        g, c, p = chosen.graph, chosen.chain, chosen.pass_
        text = None
        try:
            trace = rec.pass_trace(g.id, c.kind, p.index)
        except TooLarge as e:  # only this part is left out: the pass is named with its size
            trace, text = None, too_large_lines(g.id, c.kind, p.index, p.name, e)
        except RecordingError:
            if args.uids or args.no_source or args.no_shapes or args.layer:
                raise  # one sentence, exit 2 (readable)
            trace = None  # the stored text still shows the trace, without notes
        if trace is not None:
            try:  # printed as every view prints it, notes and layer folds included (present.trace_folds)
                text = folded_text(rec, trace, g.id, c.kind, fold=not args.unfold, layers=args.layer or (),
                                   signature=args.signature, uids=args.uids, source=not args.no_source, shapes=not args.no_shapes)
            except DataError as e:
                raise UserError(sentence(e)) from None
        elif text is None:
            text = rec.pass_text(g.id, c.kind, p.index)
        text += collectives_comment(rec, g.id, c.kind)
    text = visible(text)  # text from the recording: control characters made visible, also under rich
    if sys.stdout.isatty() and not args.plain:
        from rich.syntax import Syntax
        from thundervis.safe_text import plain_console
        plain_console().print(Syntax(text, "python", theme="ansi_dark", word_wrap=False))
    else:
        sys.stdout.write(text)
    return 0


def register(subparsers) -> None:
    """Add the ``show`` subcommand."""
    p = add_pass_command(subparsers, "show", "print one recorded trace (a pass of a chain of a graph)", "show")
    p.add_argument("--uids", action="store_true", help="annotate every symbol with its uid and origin")
    p.add_argument("--no-source", action="store_true", help="omit the source-line comments")
    p.add_argument("--no-shapes", action="store_true", help="omit the tensor metadata comments")
    p.add_argument("--plain", action="store_true", help="no highlighting even on a terminal")
    p.add_argument("--layer", "-l", action="append", metavar="L",
                   help="print this instance of a folded layer in full, e.g. model.layers.5 (repeatable)")
    p.add_argument("--signature", action="store_true",
                   help="print the def line and its inputs' metadata (by default one line: 34 inputs ▸)")
    p.add_argument("--unfold", action="store_true",
                   help="print every line: each repeated layer and the signature (by default they fold)")
    p.set_defaults(func=cmd_show)
