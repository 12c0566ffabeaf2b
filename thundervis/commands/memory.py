"""``thundervis memory REC [--graph G] [--json] [--remat off|auto] [--top N]``: what a training step
keeps alive: saved-for-backward bytes, parameters, gradients, the static peak and where it is, the
largest saved tensors, the same grouped by source line and by module, and with ``--remat`` the bytes
each rematerialization policy keeps, from the recording alone."""
from __future__ import annotations

import sys

from thundervis.commands.ls import readable
from thundervis.commands.read_options import add_recording_file_argument
from thundervis.present.memory import memory_report, policy_rows
from thundervis.present.units import format_bytes as human_bytes
from thundervis.safe_text import json_text, visible


def memory_text(report, top: int = 10, remat=None) -> str:
    """Return the human-readable form of a :class:`~thundervis.present.memory.MemoryReport`."""
    if not report.recorded:
        return f"memory: {report.message}\n"
    out = [f"saved for backward  {human_bytes(report.saved_bytes)} in {report.saved_tensors} storages "
           f"(remat {report.policy}; parameters and buffers excluded)",
           f"parameters          {human_bytes(report.parameters)}",
           f"gradients           {human_bytes(report.gradients)}",
           f"static peak         {human_bytes(report.peak_bytes)}  {report.peak_where}",
           (f"measured peak       {human_bytes(report.measured_bytes)}  {report.measured_note}"
            f" ({report.measured_method})" if report.measured_bytes is not None
            else f"measured peak       {report.measured_note}")]
    for graph, error in report.errors:
        out.append(f"graph {graph}: no ledger ({error})")
    if remat is not None or report.what_if:
        out.append("")
        out.append("what each remat policy keeps (saved bytes, from the recorded decisions):")
        for policy, nbytes, ran in policy_rows(report, remat):
            out.append(f"  {policy:<5} {human_bytes(nbytes):>10}{'   (ran)' if ran else ''}")
    out += ["", f"largest saved tensors (top {top}):"]
    for s in [s for s in report.saved if s.counted][:top]:
        shape = "×".join(str(x) for x in s.shape) or "scalar"
        src = f"{s.file.rsplit('/', 1)[-1]}:{s.line}" if s.line else "(no source line)"
        out.append(f"  {human_bytes(s.storage_bytes):>10}  {s.name:<14} {s.dtype}[{shape}]  {s.kind}  "
                   f"{s.op or s.producer}  {src}  {s.module}")
        out.append(f"{'':14}read by {', '.join(s.readers) or 'nothing'}; {s.why}")
    for title, groups in (("by source line", report.by_line), ("by module", report.by_module)):
        out += ["", f"{title}:"]
        out += [f"  {human_bytes(g.bytes):>10}  {g.tensors:>3}  {g.label}" for g in groups[:top]]
    return "\n".join(out) + "\n"


def cmd_memory(args) -> int:
    """Print the memory report of a recording."""
    with readable(args.recording) as rec:
        report = memory_report(rec, args.graph)
    if args.json:
        d = report.as_json()
        if args.remat:
            d["what_if"] = {p: b for p, b, _ in policy_rows(report, args.remat)}
        sys.stdout.write(json_text(d, indent=2) + "\n")
    else:
        sys.stdout.write(visible(memory_text(report, args.top, args.remat)))
    return 0


def register(subparsers) -> None:
    """Add the ``memory`` subcommand."""
    p = subparsers.add_parser("memory", help="what a training step keeps alive: saved tensors, peak, remat what-if")
    add_recording_file_argument(p)
    p.add_argument("--graph", "-g", type=int, default=None, help="one graph id (default: every graph)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--remat", choices=("off", "auto"), default=None,
                   help="show the bytes this remat policy keeps, from the recorded decisions (no rerun)")
    p.add_argument("--top", type=int, default=10, help="rows of each table (default 10)")
    p.set_defaults(func=cmd_memory)
