"""The profiling and input-capture flags of ``thundervis run`` (no subcommand of its own).

``--profile [--warmup N] [--steps K]`` times each compiled chain kernel by kernel after N warm-up
calls, over its next K calls, then times the K calls after those as a whole (the chain's wall time
per call, without the per-kernel clocks); ``--capture-inputs [--capture-limit-mb N]`` stores each fusion's real
inputs from its first call next to the recording; ``--check-numerics`` / ``--compare-eager
[--check-steps K]`` check the first K calls of each chain (see thundervis/numerics_check.py).
"""
from __future__ import annotations

import sys

from thundervis.errors import UserError

DEFAULT_WARMUP = 2
DEFAULT_STEPS = 5
DEFAULT_CHECK_STEPS = 1


def _add_calls_option(group, flag: str, metavar: str, which: str, default: int, note: str = "") -> None:
    """Add ``flag``, a number of calls of each chain (None when not given: the caller applies
    ``default``, which the help states); ``which`` says which calls, ``note`` follows the default."""
    group.add_argument(flag, type=int, default=None, metavar=metavar,
                       help=f"calls of each chain {which} (default {default}{note})")


def add_profile_arguments(p) -> None:
    """Add ``--profile``, ``--warmup``, ``--steps``, ``--capture-inputs``, ``--capture-limit-mb``."""
    g = p.add_argument_group("profiling")
    g.add_argument("--profile", action="store_true",
                   help="time every kernel and torch op of every compiled chain (device time on CUDA, "
                        "host time without)")
    _add_calls_option(g, "--warmup", "N", "before profiling starts", DEFAULT_WARMUP)
    _add_calls_option(g, "--steps", "K", "that are profiled", DEFAULT_STEPS,
                      "; at most K samples are kept; the K calls after them give the chain's wall time per call")
    g.add_argument("--capture-inputs", action="store_true",
                   help="store each fusion's inputs from its first call as safetensors next to the recording")
    g.add_argument("--capture-limit-mb", type=float, default=256.0, metavar="N",
                   help="total size of captured inputs (default 256 MB); fusions beyond it are skipped")
    n = p.add_argument_group("numerics")
    n.add_argument("--check-numerics", action="store_true",
                   help="check every kernel's outputs against a float64 reference of its region during the "
                        "first K calls of each chain, relative to eager float32's own error")
    _add_calls_option(n, "--check-steps", "K", "that --check-numerics / --compare-eager check", DEFAULT_CHECK_STEPS)
    n.add_argument("--compare-eager", action="store_true",
                   help="also run each compiled chain's ATen graph eagerly on the same inputs during its "
                        "first K calls and record the output and gradient deltas")


def profile_settings(args):
    """Return the ``ProfileSettings`` the flags ask for, or None when neither is on; UserError for
    bad numbers."""
    given = [f for f, v in (("--warmup", args.warmup), ("--steps", args.steps)) if v is not None]
    if given and not args.profile:
        print(f"thundervis: {' and '.join(given)} only apply with --profile; ignored.", file=sys.stderr)
    args.warmup = DEFAULT_WARMUP if args.warmup is None else args.warmup
    args.steps = DEFAULT_STEPS if args.steps is None else args.steps
    check_steps = numerics_steps(args)
    if not (args.profile or args.capture_inputs or check_steps):
        return None
    if args.warmup < 0:
        raise UserError("--warmup must be 0 or more.")
    if args.steps < 1 or args.steps > 1000:
        raise UserError("--steps must be between 1 and 1000.")
    if args.capture_limit_mb < 0:
        raise UserError("--capture-limit-mb must be 0 or more.")
    from thundervis.compiler.profiling import ProfileSettings
    limit = int(args.capture_limit_mb * 2**20) if args.capture_inputs else None
    checker = None
    if getattr(args, "check_numerics", False):
        from thundervis.numerics_check import KernelChecker
        checker = KernelChecker()
    return ProfileSettings(timing=bool(args.profile), warmup=args.warmup, steps=args.steps,
                           capture_limit_bytes=limit, check_steps=check_steps if checker else 0,
                           checker=checker,
                           compare_steps=check_steps if getattr(args, "compare_eager", False) else 0)


def numerics_steps(args) -> int:
    """Return K, the calls of each chain that ``--check-numerics`` / ``--compare-eager`` check (0 when
    neither is on); UserError for a bad ``--check-steps``."""
    on = getattr(args, "check_numerics", False) or getattr(args, "compare_eager", False)
    steps = getattr(args, "check_steps", None)
    if steps is not None and not on:
        print("thundervis: --check-steps only applies with --check-numerics or --compare-eager; ignored.",
              file=sys.stderr)
    if not on:
        return 0
    steps = DEFAULT_CHECK_STEPS if steps is None else steps
    if steps < 1 or steps > 1000:
        raise UserError("--check-steps must be between 1 and 1000.")
    return steps


def numerics_run_args(args) -> list[str]:
    """Return the numerics flags of ``args`` as ``thundervis run`` arguments (what each worker of
    ``run --nproc-per-node`` parses again, so every rank checks its own kernels)."""
    out = []
    if getattr(args, "check_numerics", False):
        out.append("--check-numerics")
    if getattr(args, "compare_eager", False):
        out.append("--compare-eager")
    if out and getattr(args, "check_steps", None) is not None:
        out += ["--check-steps", str(args.check_steps)]
    return out
