"""``thundervis repro REC KERNEL -o repro.py [--executor triton|nvfuser] [--device cpu|cuda]``: write a
standalone script (torch + the kernel's executor only) that rebuilds, checks and times one fusion."""
from __future__ import annotations

import os

from thundervis.commands.read_options import add_kernel_arguments
from thundervis.errors import UserError, as_user_errors, writing


def cmd_repro(args) -> int:
    """Write the repro script; UserError for bad requests (exit 2)."""
    from thundervis.recording import RecordingError
    from thundervis.compiler_api import RerunError, write_repro
    if os.path.isdir(args.output):
        raise UserError(f"{args.output} is a directory; give a file name such as repro.py.")
    with as_user_errors(RerunError, RecordingError), writing(args.output):
        out = write_repro(args.recording, args.kernel, args.output, executor=args.executor, device=args.device,
                          graph=args.graph, chain=args.chain, iters=args.iters)
    print(f"thundervis: wrote {out}; run it with: python {out}")
    return 0


def register(subparsers) -> None:
    """Add the ``repro`` subcommand."""
    p = subparsers.add_parser("repro", help="write a standalone script that re-runs one fusion")
    add_kernel_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="repro.py", help="the script to write")
    p.add_argument("--executor", choices=("triton", "nvfuser"), default=None,
                   help="executor of the script's kernel (default: the one that built it)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="device the script defaults to (default: where it was recorded)")
    p.add_argument("--iters", type=int, default=10, metavar="N", help="timed calls in the script (default 10)")
    p.add_argument("--graph", type=int, default=None, help="the graph holding the kernel")
    p.add_argument("--chain", default=None, help="the chain holding the kernel")
    p.set_defaults(func=cmd_repro)
