"""``thundervis run --nproc-per-node N [torchrun options] SCRIPT ARGS``: the multi-process form of
``run`` (no subcommand of its own; ``run`` hands over to :func:`cmd_run_group`).

Everything is validated before any worker starts (the target, executors, profiling flags,
torchrun's options by torchrun's own parser, the output folder); then
:func:`thundervis.distributed.launch_group` runs the job under torchrun, one recording per rank in
the group folder (default ``./thundervis-runs/<script>-<time>.tvgroup/``), packs the finished ranks'
traces into the group's store, and the command prints a summary of every rank, then (on a
terminal, without ``--no-view``) opens the group in the terminal UI like ``thundervis run`` does.
"""
from __future__ import annotations

import os
import shlex
import sys

from thundervis.commands.profile_options import numerics_run_args
from thundervis.errors import UserError


def worker_run_args(args, script, module, script_args) -> list[str]:
    """Return the ``thundervis run`` arguments each worker parses again: executors, GPU targets
    (``--target``, as given: each rank defaults to its own GPU's architecture like a single run),
    debug, the remat policy, profiling, capture and numerics flags, then ``--`` and the target with its
    arguments."""
    out = []
    if args.executors:
        out += ["--executors", args.executors]
    if getattr(args, "gpu_targets", None) is not None:
        out += ["--target", args.gpu_targets]
    if args.debug:
        out.append("--debug")
    if getattr(args, "remat", "auto") != "auto":
        out += ["--remat", args.remat]
    if args.profile:
        out += ["--profile", "--warmup", str(args.warmup), "--steps", str(args.steps)]
    if args.capture_inputs:
        out += ["--capture-inputs", "--capture-limit-mb", str(args.capture_limit_mb)]
    out += numerics_run_args(args)
    if module:
        return out + ["-m", module, *script_args]
    return out + ["--", os.path.abspath(script), *script_args]


def cmd_run_group(args, script, module, script_args, *, open_viewer, say_about_cpu) -> int:
    """Validate, launch the job under torchrun, pack the group, print its summary; return the
    launch's exit code. ``open_viewer`` and ``say_about_cpu`` are ``commands.run``'s, handed over so
    that this module never imports it (no import cycle)."""
    from thundervis import distributed, runner
    from thundervis.commands.run_options import check_run_options, parse_target_option, shown_path, target_stem
    from thundervis.commands.torchrun_options import torchrun_argv, torchrun_option
    if args.module is None and script is None:
        raise UserError("give a script to run (thundervis run --nproc-per-node N SCRIPT [ARGS...]).")
    executors, _ = check_run_options(args, script, module)  # the workers build their own settings
    parse_target_option(getattr(args, "gpu_targets", None))  # a bad --target stops before any worker
    trargs = torchrun_argv(args)
    distributed.check_torchrun_args(trargs)
    node = torchrun_option(args, "node_rank")
    node_rank = int(node) if node is not None and str(node).isdigit() else 0
    default = runner.default_output(target_stem(script, module), suffix=".tvgroup")
    out = distributed.check_group_output(args.out or default, node_rank)
    say_about_cpu(executors)
    target = [script] if script else ["-m", module]
    result = distributed.launch_group(group_dir=out, torchrun_args=trargs,
                                      run_args=worker_run_args(args, script, module, script_args),
                                      target=[*target, *script_args], node_rank=node_rank)
    from thundervis.recording.group_store import pack_group
    try:
        pack_group(out)
    except Exception as e:  # packing only saves space; the rank files are complete without it
        print(f"thundervis: could not pack the group's traces ({type(e).__name__}: {e}); "
              "the rank recordings are complete as they are", file=sys.stderr)
    shown = shown_path(out)
    sys.stdout.flush()
    if result.status == "ok":
        print(f"thundervis: one recording per rank written to {shown}")
    else:
        failed = ", ".join(f"rank {f['rank']} (exit {f.get('exit_code')}{', ' + f['signal'] if f.get('signal') else ''})"
                           for f in result.failures if f.get("rank") is not None)
        print(f"thundervis: the job {result.status}" + (f": {failed}" if failed else "")
              + f"; every rank's recording so far is in {shown}")
    from thundervis.commands.ls import group_summary_text
    from thundervis.recording import open_group
    sys.stdout.write(group_summary_text(open_group(out).overview()))
    print(f"thundervis: inspect it with: thundervis ls {shlex.quote(shown)}  "
          f"(thundervis view {shlex.quote(shown)}, thundervis diff --ranks {shlex.quote(shown)})")
    if sys.stdout.isatty() and sys.stdin.isatty() and not args.no_view and result.status != "interrupted":
        open_viewer(out)  # the group, one rank at a time (the summary above stays when it cannot run)
    return result.exit_code
