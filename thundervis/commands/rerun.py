"""``thundervis rerun REC KERNEL [--executor E|all] [--inputs random|captured] [--iters N] [--json]
[--device cpu|cuda]``: re-run one recorded fusion on its own and check its numerics.

The kernel is rebuilt from its recorded IR by the executor (see :mod:`thundervis.rerun`); the results
are printed as a table (or JSON) and appended to the recording.
"""
from __future__ import annotations

import sys

from thundervis.commands.read_options import add_kernel_arguments
from thundervis.errors import UserError
from thundervis.present.units import format_error, format_us, plural
from thundervis.safe_text import json_text, visible, visible_line


def report_text(report) -> str:
    """Return the human-readable table of a :class:`thundervis.rerun.RerunReport`."""
    lines = [f"{report.kernel} · graph {report.graph} {report.chain} · {report.device} · "
             f"{report.inputs} inputs"]
    lines += [f"note: {n}" for n in report.notes]
    lines.append(f"{'executor':<10} {'status':<12} {'median':>11} {'min':>11} {'max abs err':>12} "
                 f"{'max rel err':>12}  clock")
    for r in report.results:
        if r.status == "ok":
            lines.append(f"{r.executor:<10} {r.status:<12} {format_us(r.median_us):>11} {format_us(r.min_us):>11} "
                         f"{format_error(r.max_abs_error):>12} {format_error(r.max_rel_error):>12}  {r.clock}")
        else:
            lines.append(f"{r.executor:<10} {r.status:<12} {r.detail}")
    iters = report.results[0].iters if report.results else 0
    lines.append(f"(median/min over {plural(iters, 'call')} after one warm-up; errors against the float64 reference "
                 "interpreter, rel = max |out - ref| / max |ref|)")
    return "\n".join(lines) + "\n"


def cmd_rerun(args) -> int:
    """Re-run the kernel and print the results; UserError for bad requests (exit 2)."""
    from thundervis.recording import RecordingError
    from thundervis.compiler_api import RerunError, rerun_kernel
    try:
        report = rerun_kernel(args.recording, args.kernel, executor=args.executor, inputs=args.inputs,
                              iters=args.iters, device=args.device, graph=args.graph, chain=args.chain,
                              store=not args.no_store)
    except (RerunError, RecordingError) as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    if args.json:
        sys.stdout.write(json_text(report.as_json(), indent=2) + "\n")
    else:
        sys.stdout.write(visible(report_text(report)))
    if report.store_error is not None:
        sys.stdout.flush()
        print(f"thundervis: could not store the results in {args.recording} ({visible_line(report.store_error)}).",
              file=sys.stderr)
    failed = [r for r in report.results if r.status == "failed"]
    return 1 if failed and len(failed) == len([r for r in report.results if r.status != "unavailable"]) else 0


def register(subparsers) -> None:
    """Add the ``rerun`` subcommand."""
    p = subparsers.add_parser("rerun", help="re-run one recorded fusion on its own, with a numerics check")
    add_kernel_arguments(p, kernel_hint=" (see thundervis ls)")
    p.add_argument("--executor", default=None, metavar="triton|nvfuser|inductor|torch|all",
                   help="executor to rebuild the kernel with (default: the one that built it); all: compare every one")
    p.add_argument("--inputs", choices=("random", "captured"), default="random",
                   help="random inputs with the recorded metadata, or those stored by run --capture-inputs")
    p.add_argument("--iters", type=int, default=10, metavar="N", help="timed calls (default 10)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where to run (default: where it was recorded)")
    p.add_argument("--graph", type=int, default=None, help="the graph holding the kernel (names repeat per chain)")
    p.add_argument("--chain", default=None, help="the chain holding the kernel (forward, backward, inference)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--no-store", action="store_true", help="do not append the results to the recording")
    p.set_defaults(func=cmd_rerun)
