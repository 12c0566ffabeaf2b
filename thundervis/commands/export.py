"""``thundervis export REC --perfetto OUT.json``: the profiled calls as a Chrome/Perfetto trace."""
from __future__ import annotations

import os

from thundervis.commands.read_options import add_recording_file_argument
from thundervis.errors import UserError, writing
from thundervis.safe_text import json_text


def cmd_export(args) -> int:
    """Write the Perfetto trace of the recording's timings; UserError when nothing was profiled."""
    from thundervis.commands.ls import open_or_fail
    from thundervis.export import perfetto_trace
    if not args.perfetto:
        raise UserError("say what to export: --perfetto OUT.json.")
    rec = open_or_fail(args.recording)
    try:
        tm = rec.timings()
    finally:
        rec.close()
    if not tm.kernels:
        raise UserError(f"{args.recording} holds no timings; record it with thundervis run --profile.")
    doc = perfetto_trace(tm, os.path.basename(args.recording))
    with writing(args.perfetto), open(args.perfetto, "w", encoding="utf-8") as f:
        f.write(json_text(doc))
    n = sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") not in ("call", "untimed call"))
    untimed = sum(1 for e in doc["traceEvents"] if e.get("cat") == "untimed call")
    more = f" and {untimed} untimed call{'' if untimed == 1 else 's'} (wall time)" if untimed else ""
    print(f"thundervis: wrote {n} kernel slices{more} to {args.perfetto} (open it in https://ui.perfetto.dev)")
    return 0


def register(subparsers) -> None:
    """Add the ``export`` subcommand."""
    p = subparsers.add_parser("export", help="export a recording's kernel timings (Perfetto trace)")
    add_recording_file_argument(p, "--profile")
    p.add_argument("--perfetto", metavar="OUT.json", help="write a Chrome/Perfetto trace-event JSON file")
    p.set_defaults(func=cmd_export)
