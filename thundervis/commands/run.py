"""``thundervis run [--out PATH] [--executors LIST] [--no-view] (-m MODULE | SCRIPT) [ARGS...]``.

Runs the script in this process like ``python SCRIPT ARGS`` with every ``torch.compile`` routed to
our compiler and recorded, then exits with the script's own exit code. Everything is validated
before the script starts (exit 2 with one sentence).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from thundervis.commands.run_options import (add_target_argument, check_run_options, parse_executors,
                                           parse_target_option, shown_path, target_stem)
from thundervis.commands.abstract_options import abstract_settings, add_abstract_arguments
from thundervis.errors import UserError

# The executor-list parser's old name (other modules import it from here).
_executors = parse_executors


def open_viewer(path: str) -> bool:
    """Open the recording (or group folder) in the TUI (:func:`thundervis.api.view_recording`, the
    one module that opens views) and return True once the user quits it; return False (after one
    line on stderr when it failed) when it cannot run, so the caller prints the summary instead."""
    from thundervis import api
    try:
        api.view_recording(path)
    except ImportError as e:
        print(f"thundervis: the viewer needs Textual ({e}); pip install 'thundervis[tui]'", file=sys.stderr)
        return False
    except Exception as e:  # the recording is written; a viewer problem must not hide that
        print(f"thundervis: could not open the viewer ({type(e).__name__}: {e})", file=sys.stderr)
        return False
    return True


def split_script_args(rest: list[str]) -> list[str]:
    """Return the target and its arguments from what follows our options: a ``--`` right before
    the script is ours (``thundervis run -- train.py``) and dropped; everything after the script is
    the script's, byte for byte, like ``python SCRIPT ARGS`` and torchrun (a ``--no-view`` or a
    ``--`` there included)."""
    return rest[1:] if rest[:1] == ["--"] else rest


def _say_once_about_cpu(executors) -> None:
    """Tell the user, once per run, that without CUDA the kernels and timings are CPU ones."""
    import torch
    if torch.cuda.is_available() or (executors is not None and "triton" not in executors):
        return
    if executors is None:
        print("thundervis: no CUDA device here: Triton kernels are generated and recorded, and each "
              "fusion runs on the CPU through torch or Inductor, whichever its first call measures "
              "faster; any timings are CPU timings, not GPU timings.", file=sys.stderr)
        return
    print("thundervis: no CUDA device here: Triton kernels run in Triton's interpreter on the CPU, "
          "and any timings are CPU timings, not GPU timings.", file=sys.stderr)


def _print_fallbacks(path: str):
    """Print how many chains ran eagerly and every fallback of the run (ops run by torch grouped by
    reason) and return the ``present.ls_view.LsView`` they come from, which the rest of the run's
    summary reads too; a recording that cannot be read says so in one line (None returned)."""
    from thundervis.commands.ls import fallback_lines, ls_view_or_fail
    from thundervis.recording import RecordingError, open_recording
    try:
        with open_recording(path, check=False) as rec:
            view = ls_view_or_fail(rec)
            d = view.as_json()
            lines = fallback_lines(d, ops_limit=5)
            if d.get("compile_text"):  # present.compile_times: forward + the lazily built backward
                lines.insert(0, d["compile_text"])
            lines += d["numerics_lines"]  # present.numerics, as ls prints them
    except (RecordingError, OSError) as e:
        print(f"thundervis: could not read the fallbacks back: {e}")
        return None
    print("thundervis: " + lines[0])
    for line in lines[1:]:
        print("thundervis: " + line)
    return view


def resolve_target(args) -> tuple:
    """Return (script, module, script args) from the parsed ``run`` arguments; UserError when there
    is no target. Nothing after the script or ``-m MODULE`` is read as ours."""
    if args.module is not None:
        # -m takes the rest of the command line, like python -m: every argument after the module
        # is the module's. argparse ends an option's REMAINDER at a "--" and hands that "--" and
        # what follows to the positional: joined back, the module's argv is as typed.
        if not args.module or args.module[0].startswith("-"):
            raise UserError("-m wants a module name (thundervis run -m MODULE [ARGS...]).")
        return None, args.module[0], list(args.module[1:]) + list(args.target)
    rest = split_script_args(list(args.target))
    if not rest:
        raise UserError("give a script to run (thundervis run SCRIPT [ARGS...]) or -m MODULE.")
    return rest[0], None, rest[1:]


def cmd_run(args) -> int:
    """Validate, run the script recording every compile, report the recording."""
    from thundervis import runner
    script, module, script_args = resolve_target(args)
    if getattr(args, "no_cache", False):  # read by every compiler of this run, torchrun's workers too
        os.environ["THUNDERVIS_COMPILE_CACHE"] = "off"
    from thundervis.commands.torchrun_options import distributed_requested
    abstract = abstract_settings(args)
    if distributed_requested(args):
        if abstract is not None:
            raise UserError("--abstract runs the script in one process: drop --nproc-per-node (or --abstract).")
        from thundervis.commands.run_group import cmd_run_group
        # run.py hands its helpers over: run_group never imports run (no import cycle)
        return cmd_run_group(args, script, module, script_args, open_viewer=open_viewer,
                             say_about_cpu=_say_once_about_cpu)
    executors, profile = check_run_options(args, script, module)  # before the output folder is made
    targets = parse_target_option(getattr(args, "gpu_targets", None))
    out = runner.check_output(args.out or runner.default_output(target_stem(script, module)))
    if abstract is None:
        _say_once_about_cpu(executors)
    result = runner.run_target(script=script, module=module, args=script_args, out=out,
                               executors=executors, debug=args.debug, profile=profile, targets=targets,
                               remat=args.remat, abstract=abstract)
    shown = shown_path(result.path)
    sys.stdout.flush()
    if result.status == "ok":
        print(f"thundervis: recording written to {shown}")
    else:
        print(f"thundervis: the script {result.status} (exit {result.exit_code}); "
              f"everything compiled so far is in {shown}")
    view = _print_fallbacks(result.path)  # read once: the abstract answer and the summary below are in it
    if abstract is not None and view is not None:  # the abstract run's fit and step per GPU (present.abstract_fit)
        for line in view.abstract_lines:
            print("thundervis: " + line)
    print(f"thundervis: inspect it with: thundervis ls {shlex.quote(shown)}  "
          f"(or thundervis show {shlex.quote(shown)})")
    if sys.stdout.isatty() and not args.no_view and result.status != "interrupted":
        if not open_viewer(result.path):
            from thundervis.commands.ls import view_text
            if view is not None:
                sys.stdout.write(view_text(view, passes=False))
    return result.exit_code


def register(subparsers) -> None:
    """Add the ``run`` subcommand."""
    p = subparsers.add_parser(
        "run", help="run a script with every torch.compile recorded",
        usage="thundervis run [--out PATH] [--executors LIST] [--no-view] [--nproc-per-node N [torchrun "
              "options]] (-m MODULE | SCRIPT) [ARGS...]",
        epilog="Everything after the script (or -m MODULE) is the script's, as with python and "
               "torchrun: put thundervis's own options before it.")
    p.add_argument("--out", "-o", metavar="PATH",
                   help="recording to write (default: ./thundervis-runs/<script>-<time>.tvrec)")
    p.add_argument("--executors", metavar="LIST", help="comma-separated executors in priority order, e.g. triton,torch")
    p.add_argument("--no-view", action="store_true", help="do not open the viewer at the end")
    p.add_argument("--debug", action="store_true", help="check every trace after every pass")
    p.add_argument("--no-cache", action="store_true",
                   help="compile every chain afresh: neither read nor write the persistent compile cache "
                        "($THUNDERVIS_CACHE_DIR/compile, default ~/.cache/thundervis/compile)")
    p.add_argument("--remat", choices=("off", "auto"), default="auto",
                   help="rematerialization: auto (default) recomputes cheap values in the backward instead of "
                        "saving them; off saves what eager saves")
    add_target_argument(p)
    add_abstract_arguments(p)
    from thundervis.commands.profile_options import add_profile_arguments
    add_profile_arguments(p)
    from thundervis.commands.torchrun_options import add_torchrun_arguments
    add_torchrun_arguments(p)
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS...]",
                   help="run a module like python -m; every argument after it is the module's")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                   help="the script and its arguments")
    p.set_defaults(func=cmd_run)
