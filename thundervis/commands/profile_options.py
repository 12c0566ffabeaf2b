"""The profiling and input-capture flags of ``thundervis run`` (no subcommand of its own).

``--profile [--warmup N] [--steps K]`` times each compiled chain kernel by kernel after N warm-up
calls, over its next K calls; ``--capture-inputs [--capture-limit-mb N]`` stores each fusion's real
inputs from its first call next to the recording.
"""
from __future__ import annotations

import sys

from thundervis.errors import UserError

DEFAULT_WARMUP = 2
DEFAULT_STEPS = 5


def add_profile_arguments(p) -> None:
    """Add ``--profile``, ``--warmup``, ``--steps``, ``--capture-inputs``, ``--capture-limit-mb``."""
    g = p.add_argument_group("profiling")
    g.add_argument("--profile", action="store_true",
                   help="time every kernel and torch op of every compiled chain (device time on CUDA, "
                        "host time without)")
    g.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="calls of each chain before profiling starts (default 2)")
    g.add_argument("--steps", type=int, default=None, metavar="K",
                   help="calls of each chain that are profiled (default 5; at most K samples are kept)")
    g.add_argument("--capture-inputs", action="store_true",
                   help="store each fusion's inputs from its first call as safetensors next to the recording")
    g.add_argument("--capture-limit-mb", type=float, default=256.0, metavar="N",
                   help="total size of captured inputs (default 256 MB); fusions beyond it are skipped")


def profile_settings(args):
    """Return the ``ProfileSettings`` the flags ask for, or None when neither is on; UserError for
    bad numbers."""
    given = [f for f, v in (("--warmup", args.warmup), ("--steps", args.steps)) if v is not None]
    if given and not args.profile:
        print(f"thundervis: {' and '.join(given)} only apply with --profile; ignored.", file=sys.stderr)
    args.warmup = DEFAULT_WARMUP if args.warmup is None else args.warmup
    args.steps = DEFAULT_STEPS if args.steps is None else args.steps
    if not (args.profile or args.capture_inputs):
        return None
    if args.warmup < 0:
        raise UserError("--warmup must be 0 or more.")
    if args.steps < 1 or args.steps > 1000:
        raise UserError("--steps must be between 1 and 1000.")
    if args.capture_limit_mb < 0:
        raise UserError("--capture-limit-mb must be 0 or more.")
    from thundervis.compiler.profiling import ProfileSettings
    limit = int(args.capture_limit_mb * 2**20) if args.capture_inputs else None
    return ProfileSettings(timing=bool(args.profile), warmup=args.warmup, steps=args.steps,
                           capture_limit_bytes=limit)
