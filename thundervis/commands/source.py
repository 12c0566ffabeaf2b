"""``thundervis source REC [FILE] [--graph G] [--annotated] [--json]``: the user's file (default: the
run's script) annotated line
by line with the ops each line became (forward and backward), the kernels they ended in, the ops
left to torch and why, and each line's share of the profiled time (thundervis.present.source_view)."""
from __future__ import annotations

import sys
import textwrap

from thundervis.errors import UserError
from thundervis.safe_text import json_text, visible, visible_line

_WIDTH = 100


def source_text(view, annotated_only: bool = False) -> str:
    """Return the printed form of a :class:`~thundervis.present.source_view.SourceFile`: a summary
    line, then each line of the file (``annotated_only``: only the lines with ops, ``...`` for the
    gaps) with its chains' notes below it and its time share on its right."""
    width = len(str(view.lines[-1].line)) if view.lines else 1
    out = [visible_line(view.summary())]
    if view.note:  # present's sentences for the parts too large to show; the rest of the file follows
        out.extend(textwrap.wrap(visible_line(view.note), width=_WIDTH, initial_indent="note: ",
                                 subsequent_indent="      ", break_on_hyphens=False))
    # With more than one graph, each note says which graphs it is about (g0, g0–3: the same in each).
    several = len({o.graph for row in view.lines for o in row.ops}) > 1
    indent = " " * (width + 5)
    last = 0
    for row in view.lines:
        if annotated_only and not row.ops and not row.eager:
            continue
        if annotated_only and row.line > last + 1:
            out.append(" " * (width + 2) + "...")
        last = row.line
        mark = "●" if row.ops else "○" if row.eager else " "  # ○: code Dynamo left to eager
        code = visible_line(row.text.rstrip())
        time = "  ".join(x for x in (row.time_text(), row.saved_text()) if x)  # present's wording
        head = f"{row.line:>{width}} {mark}  {code}"
        if time:
            head = f"{head:<{_WIDTH - len(time) - 2}}  {time}" if len(head) < _WIDTH - len(time) - 2 \
                else f"{head}  {time}"
        out.append(head)
        for text in row.eager:  # present.eager_regions' wording
            out.extend(textwrap.wrap(visible_line(text), width=_WIDTH, initial_indent=indent + "↳ ",
                                     subsequent_indent=indent + "    ", break_on_hyphens=False))
        for note in row.notes():
            text = f"{note.graph_label} {note.text()}" if several else note.text()
            out.extend(textwrap.wrap(visible_line(text), width=_WIDTH, initial_indent=indent + "↳ ",
                                     subsequent_indent=indent + "    ", break_on_hyphens=False))
    return "\n".join(out) + "\n"


def cmd_source(args) -> int:
    """Print (or ``--json``: dump) the annotated file."""
    from thundervis.commands.ls import readable
    from thundervis.present.source_view import default_file, source_file
    from thundervis.recording import UnknownItem
    with readable(args.recording, args.rank) as rec:
        try:
            file = args.file or default_file(rec)
            if file is None:
                raise UnknownItem("this recording holds no user source files")
            view = source_file(rec, file, args.graph)
        except UnknownItem as e:
            raise UserError(str(e).rstrip(".") + ".") from None
    if args.json:
        sys.stdout.write(json_text(view.as_json(), indent=1) + "\n")
    else:
        sys.stdout.write(visible(source_text(view, args.annotated)))
    return 0


def register(subparsers) -> None:
    """Add the ``source`` subcommand."""
    p = subparsers.add_parser("source", help="the user's file annotated line by line: ops, kernels, fallbacks, time")
    p.add_argument("recording", metavar="REC", help="a .tvrec recording, or a group folder (one recording per rank)")
    p.add_argument("file", metavar="FILE", nargs="?", default=None,
                   help="a recorded source file: its name (train.py) or a path suffix (examples/train.py); "
                        "default: the run's script")
    p.add_argument("--graph", "-g", type=int, default=None, help="only this graph's ops (default: every graph)")
    p.add_argument("--rank", type=int, default=None, help="in a group folder: the rank to show (default: the lowest)")
    p.add_argument("--annotated", "-a", action="store_true", help="print only the lines that made ops")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_source)
