"""``thundervis diff``: what a pass did, or what changed between two runs.

- ``thundervis diff REC [--graph G] [--chain C] --from P --to Q [--side-by-side] [--html OUT]``:
  the pass diff of two traces of one chain (default: the pass before ``--to``, and the last pass).
  What the pass did to a run of equal layers is shown for the first and folded for the rest
  (``thundervis.diff.layer_folds``) unless ``--unfold`` or ``--full``; ``--layer model.layers.5``
  shows that layer's changes in place.
- ``thundervis diff REC_A REC_B [--json]``: run comparison (graphs, fusions, kernel times).
"""
from __future__ import annotations

import sys
from typing import Optional

from thundervis.errors import UserError, writing
from thundervis.safe_text import json_text, visible, visible_line
from thundervis.present.units import plural


def pass_diff(rec, graph, chain, from_, to, traces: Optional[list] = None):
    """Return the :class:`~thundervis.diff.TraceDiff` the arguments select in an open recording;
    the two traces are appended to ``traces`` when given (callers reuse them: a big pass takes
    seconds to load)."""
    from thundervis.commands.read_options import pass_pair
    from thundervis.diff.labelled import labelled_diff
    from thundervis.recording import RecordingError
    chosen = pass_pair(rec, graph, chain, from_, to)  # present.selection
    g, c, before, after = chosen.graph, chosen.chain, chosen.before, chosen.pass_
    try:
        a = rec.pass_trace(g.id, c.kind, before.index)
        b = rec.pass_trace(g.id, c.kind, after.index)
    except RecordingError as e:
        raise UserError(str(e)) from None
    if traces is not None:
        traces.extend((a, b))
    return labelled_diff(a, b, g.id, c.kind, before, after)


def note_lines(a, b) -> list[str]:
    """Return, for the top-level symbols of trace ``b`` whose executor or note differs from the same
    uid in trace ``a`` (or that ``a`` lacks), why they run where they run: ``uid sym: torch: not
    lowered: ...``. Recorded text is made terminal-safe."""
    from thundervis.present.status import symbol_note
    from thundervis.safe_text import visible_line
    before = {x.uid: (x.executor, x.note) for x in a.symbols}
    out = []
    for x in b.symbols:
        note = symbol_note(x.executor, x.note)
        if x.sym == "del" or not note or before.get(x.uid) == (x.executor, x.note):
            continue
        out.append(f"  {x.uid} {x.sym}: {visible_line(note)}")
    return out


def fallback_changes(a: dict, b: dict) -> list[str]:
    """Return text lines comparing the fallbacks of two ``ls --json`` documents: eager chains on
    each side, and each fallback (ops grouped by reason) found on one side only."""
    from thundervis.safe_text import visible_line
    lines = [f"chains ran eagerly: A {a['chains_eager']} of {a['chains_total']}, "
             f"B {b['chains_eager']} of {b['chains_total']}"]

    def keys(d):
        return {(f["kind"], f["what"], f["reason"], f["source"]) for f in d["fallbacks"]}
    ka, kb = keys(a), keys(b)
    for side, only in (("A", ka - kb), ("B", kb - ka)):
        for kind, what, reason, source in sorted(only, key=lambda k: tuple(str(x) for x in k))[:20]:
            where = f" · {visible_line(source)}" if source else ""
            lines.append(f"  only in {side}: {kind}: {visible_line(what)}{where}: {visible_line(reason)}")
        if len(only) > 20:
            lines.append(f"  only in {side}: ... and {len(only) - 20} more")
    return lines


def _kernel_lines(d) -> list[str]:
    out = []
    for kernel, rows in d.kernels().items():
        ops = ", ".join(r.a.sym.removeprefix("prims.") for r in rows[:8]) + (", …" if len(rows) > 8 else "")
        out.append(f"  {kernel} <- {plural(len(rows), 'op')}: {ops}")
    return out


def _chosen_folds(args, d) -> tuple:
    """Return the layer folds of pass diff ``d`` the options ask for: none with ``--full`` or
    ``--unfold``, else every fold but the layers ``--layer`` names (one sentence for a bad one)."""
    from thundervis.diff.layer_folds import diff_folds, open_diff_layers
    if args.full or args.unfold:
        if args.layer:
            opened = "--full" if args.full else "--unfold"
            raise UserError(f"{opened} already shows every layer; give --layer or {opened}, not both.")
        return ()
    if not args.layer:
        return diff_folds(d)
    from thundervis.errors import sentence
    from thundervis.present.errors import DataError
    try:
        return open_diff_layers(d, diff_folds(d), args.layer)
    except DataError as e:
        raise UserError(sentence(e)) from None


def cmd_diff(args) -> int:
    """Print a pass diff (one recording) or a run comparison (two)."""
    from thundervis.commands.ls import open_or_fail
    if args.ranks:
        from thundervis.commands.diff_ranks import cmd_diff_ranks
        return cmd_diff_ranks(args)
    if len(args.recordings) == 2:
        if (args.from_ is not None or args.to is not None or args.graph is not None or args.chain is not None
                or args.layer):
            raise UserError("--graph, --chain, --from, --to and --layer select a pass diff of one recording; "
                            "with two recordings thundervis diff compares the runs.")
        return _compare(args, open_or_fail)
    if len(args.recordings) != 1:
        raise UserError("give one recording (a pass diff) or two (a run comparison).")
    rec = open_or_fail(args.recordings[0])
    try:
        traces: list = []
        d = pass_diff(rec, args.graph, args.chain, args.from_, args.to, traces)
        notes = note_lines(*traces)
    finally:
        rec.close()
    context = None if args.full else args.context
    from thundervis.diff import render
    from thundervis.diff.layer_folds import diff_folds
    folds = _chosen_folds(args, d)
    if args.html:
        body = (render.side_by_side_html(d, context, folds=folds) if args.side_by_side
                else render.unified_html(d, context, folds=folds))
        with writing(args.html), open(args.html, "w", encoding="utf-8") as f:
            f.write(render.html_page(body, f"{d.before} → {d.after}"))
        print(f"thundervis: diff written to {args.html}")
    elif args.json:
        rows = [{"status": r.status, "a": r.a.text if r.a else None, "b": r.b.text if r.b else None,
                 "uid": r.uid, "kernel": r.kernel, "partners": [p.uid for p in r.partners]}
                for r in d.lines]
        sys.stdout.write(json_text({"before": d.before, "after": d.after, "counts": d.counts(), "lines": rows,
                                    "folds": [f.as_json() for f in diff_folds(d)]}, indent=1) + "\n")
        return 0
    elif sys.stdout.isatty() and not args.plain:
        from thundervis.safe_text import plain_console
        console = plain_console()
        console.print(render.side_by_side_text(d, context, console.width, folds=folds) if args.side_by_side
                      else render.unified_rich(d, context, folds=folds), crop=False)
    elif args.side_by_side:
        sys.stdout.write(render.side_by_side_plain(d, context, folds=folds))
    else:
        sys.stdout.write(visible(render.unified_plain(d, context, folds=folds)))
    if not args.html:
        print(visible(d.summary()))
        for line in _kernel_lines(d):
            print(visible(line))
        if notes:
            print("why (executor and note of the symbols this pass changed):")
            for line in notes:
                print(visible(line))
    return 0


def _compare(args, open_or_fail) -> int:
    from thundervis.diff.runs import compare_runs, run_side_from_recording
    from thundervis.recording import RecordingError
    from thundervis.commands.ls import summary_dict
    sides, docs = [], []
    for path in args.recordings:
        rec = open_or_fail(path)
        try:
            sides.append(run_side_from_recording(rec, label=path))
            docs.append(summary_dict(rec))
        except RecordingError as e:
            raise UserError(str(e)) from None
        finally:
            rec.close()
    comp = compare_runs(*sides)
    if args.json:
        doc = comp.as_json()
        doc["fallbacks"] = {side: {"chains_eager": d["chains_eager"], "chains_total": d["chains_total"],
                                   "fallbacks": d["fallbacks"]} for side, d in zip("ab", docs)}
        sys.stdout.write(json_text(doc, indent=1) + "\n")
    else:
        sys.stdout.write(visible(comp.render_text()))
        sys.stdout.write(visible("fallbacks\n" + "\n".join(fallback_changes(*docs)) + "\n"))
    return 0


def register(subparsers) -> None:
    """Add the ``diff`` subcommand."""
    p = subparsers.add_parser(
        "diff", help="diff two passes of a recording, or compare two recordings",
        usage="thundervis diff REC [--graph G] [--chain C] [--from P] [--to Q] [--side-by-side] [--html OUT]\n"
              "       thundervis diff REC_A REC_B [--json]\n"
              "       thundervis diff --ranks GROUP [--json]")
    p.add_argument("recordings", nargs="+", metavar="REC", help="one recording (pass diff) or two (run comparison)")
    p.add_argument("--ranks", action="store_true",
                   help="REC is a group folder: compare its ranks' traces and kernel times")
    p.add_argument("--graph", "-g", type=int, default=None, help="graph id (default: the first with a forward chain)")
    p.add_argument("--chain", "-c", default=None, help="forward, backward, inference, ... (default: forward)")
    p.add_argument("--from", dest="from_", default=None, metavar="P",
                   help="pass index or name before (default: the pass before --to)")
    p.add_argument("--to", default=None, metavar="Q", help="pass index or name after (default: the last pass)")
    p.add_argument("--side-by-side", "-s", action="store_true", help="before and after side by side")
    p.add_argument("--html", metavar="OUT", help="write the diff as a standalone HTML page")
    p.add_argument("--json", action="store_true", help="print JSON (rows of a pass diff, or the run comparison)")
    p.add_argument("--context", type=int, default=3, metavar="N",
                   help="unchanged lines shown around each change (default: 3)")
    p.add_argument("--full", action="store_true", help="show every line, unchanged ones and repeated layers included")
    p.add_argument("--unfold", action="store_true",
                   help="show what the pass did to every repeated layer (by default the equal ones fold)")
    p.add_argument("--layer", "-l", action="append", metavar="L",
                   help="show what the pass did to this folded layer, e.g. model.layers.5 (repeatable)")
    p.add_argument("--plain", action="store_true", help="no colours, even on a terminal")
    p.set_defaults(func=cmd_diff)
