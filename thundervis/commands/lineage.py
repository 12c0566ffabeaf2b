"""``thundervis lineage REC [--graph G] (--uid U | --source FILE:LINE) [--json]``: follow a symbol
or a source line through every pass, forward and backward, to the executor and kernel it ended in."""
from __future__ import annotations

import os
import sys
import textwrap

from thundervis.errors import UserError
from thundervis.commands.ls import readable
from thundervis.commands.read_options import add_recording_file_argument
from thundervis.present.kernel_rows import kernel_table
from thundervis.present.status import symbol_note
from thundervis.safe_text import json_text, visible, visible_line
from thundervis.present.units import plural


def _sym_text(s) -> str:
    ex = f" [{s.executor}]" if s.executor else ""
    return f"{s.uid} {s.sym}{ex}"


def lineage_text(lin, fell_back: dict | None = None) -> str:
    """Return the human-readable form of one :class:`~thundervis.recording.Lineage`; each end says
    why it runs where it runs (its recorded note) and ``fell_back`` ({(graph, chain, kernel name):
    the kernel table's ``fallback_text``}) marks kernels that ran in torch at run time."""
    fell_back = fell_back or {}
    lines = []
    src = ""
    if lin.source is not None and lin.source.line:
        src = f"{os.path.basename(lin.source.file)}:{lin.source.line}  {lin.source.code}"
    head = src if lin.query.startswith(os.path.basename(lin.source.file) if lin.source else "\0") else \
        " · ".join(x for x in (lin.query, src) if x)
    lines.append(f"graph {lin.graph} · {head}")
    for c in lin.chains:
        lines.append(f"{c.chain}  (via {c.link})" if c.link else c.chain)
        prev = None
        for st in c.steps:
            key = tuple((s.uid, s.sym, s.executor) for s in st.symbols)
            head = f"  {st.pass_index:>2} {st.pass_name:<11}"
            if not st.symbols:
                lines.append(head + "(gone)")
            elif key == prev:
                lines.append(head + "unchanged")
            else:
                sub = f"  (+{st.n_sub} subsymbols)" if st.n_sub else ""
                body = " · ".join(_sym_text(s) for s in st.symbols) + sub
                lines.extend(textwrap.wrap(body, width=100, initial_indent=head,
                                           subsequent_indent=" " * len(head)))
            prev = key
        if c.chain in ("dynamo", "joint"):  # recorded for reference only, never executed
            continue
        by_executor: dict = {}
        notes: list[str] = []
        for e in c.ends:
            label = f"{e.symbol.uid} {e.symbol.sym}"
            if e.kernel:
                label += f" = kernel {e.kernel.name} ({plural(len(e.kernel.ops), 'op')})"
            by_executor.setdefault(e.executor or "no executor", []).append(label)
            fell = fell_back.get((lin.graph, c.chain, e.symbol.sym))
            if fell:  # present's wording (KernelRow.fallback_text), as show's note and the TUI say it
                notes.append(f"{e.symbol.uid} {visible_line(fell)}")
            note = symbol_note(e.executor, e.symbol.note)
            if note and not e.kernel:
                notes.append(f"{e.symbol.uid} {e.symbol.sym.removeprefix('prims.')}: {visible_line(note)}")
        for ex, labels in by_executor.items():
            lines.extend(textwrap.wrap(f"ends in {ex}: " + ", ".join(labels), width=100,
                                       initial_indent="  ", subsequent_indent="      "))
        for note in notes:
            lines.extend(textwrap.wrap(f"why: {note}", width=100, initial_indent="  ", subsequent_indent="      "))
    return "\n".join(lines) + "\n"


def _parse_source(text: str) -> tuple[str, int]:
    file, sep, line = text.rpartition(":")
    if not sep or not file or not line.isdigit():
        raise UserError(f"--source wants FILE:LINE (for example train.py:42), not {text!r}.")
    return file, int(line)


def cmd_lineage(args) -> int:
    """Print the lineage of ``--uid`` or ``--source``."""
    from thundervis.recording import UnknownItem
    if bool(args.uid) == bool(args.source):
        raise UserError("give exactly one of --uid U or --source FILE:LINE.")
    query = _parse_source(args.source) if args.source else None
    with readable(args.recording) as rec:
        try:
            if args.uid:
                lineages = [rec.lineage_of_uid(args.graph if args.graph is not None else 0, args.uid)]
            else:
                lineages = rec.lineage_of_source(query[0], query[1], args.graph)
        except UnknownItem as e:
            raise UserError(str(e) + ".") from None
        fell_back = {(r.graph, r.chain, r.name): r.fallback_text for r in kernel_table(rec) if r.fallback}
    if args.json:
        sys.stdout.write(json_text([x.as_json() for x in lineages], indent=2) + "\n")
    else:
        sys.stdout.write(visible("\n".join(lineage_text(x, fell_back) for x in lineages)))
    return 0


def register(subparsers) -> None:
    """Add the ``lineage`` subcommand."""
    p = subparsers.add_parser("lineage", help="follow a symbol or a source line through the passes")
    add_recording_file_argument(p)
    p.add_argument("--graph", "-g", type=int, default=None,
                   help="graph id (default: 0 for --uid, every graph for --source)")
    p.add_argument("--uid", help="a symbol uid such as f12 (see `thundervis show --uids`)")
    p.add_argument("--source", metavar="FILE:LINE", help="a line of the user's program")
    p.add_argument("--json", action="store_true", help="print the lineage as JSON")
    p.set_defaults(func=cmd_lineage)
