"""The options of ``thundervis run`` that its three forms check the same way: one process
(:mod:`.run`), a torchrun group (:mod:`.run_group`) and each group worker (:mod:`.rank_worker`).

:func:`check_run_options` validates the executor list, the target and the profiling flags, in that
order, before anything runs (UserError with one sentence); :func:`target_stem` names default
outputs after the target and :func:`shown_path` is how a written output is named to the user.
"""
from __future__ import annotations

import os
from typing import Optional

from thundervis.errors import UserError


def parse_executors(text: Optional[str]) -> Optional[list[str]]:
    """Return the executor list from ``a,b,c`` (None for the defaults); UserError for unknown or
    unavailable executors."""
    if not text:
        return None
    from thundervis.compiler.executors import available_executors, get_executor
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = available_executors()
    for n in names:
        if n not in known:
            raise UserError(f"unknown executor {n!r} (known: {', '.join(known)}).")
        why = get_executor(n).available()
        if why:
            raise UserError(f"executor {n!r} cannot be used here: {why.rstrip('.')}.")
    return names


def parse_target_option(text: Optional[str]):
    """Return the ``--target`` value for the runner: ``"local"`` when not given (the local GPU's
    architecture, none without CUDA), None for ``--target none``, else the validated list text;
    UserError for an unknown architecture."""
    if text is None:
        return "local"
    if text.strip().lower() in ("", "none"):
        return None
    from thundervis.compiler.aot.targets import TargetError, parse_targets
    try:
        return ",".join(f"sm_{a}" for a in parse_targets(text))
    except TargetError as e:
        raise UserError(f"--target: {e}.") from None


def add_target_argument(p) -> None:
    """Add ``--target LIST`` to a ``run`` parser."""
    p.add_argument("--target", dest="gpu_targets", metavar="LIST", default=None,
                   help="GPU targets every Triton kernel is compiled for ahead of time, e.g. sm_80,sm_90 "
                        "(default: the local GPU's architecture; none without CUDA; 'none': off)")


def check_run_options(args, script: Optional[str], module: Optional[str], *,
                      check_target: bool = True) -> tuple:
    """Validate the parsed ``run`` options for ``script`` or ``module``: the executors, the target
    (unless ``check_target`` is False: a group worker leaves it to ``runner.run_target``, its
    launcher checked it) and the profiling flags. Return (executor list or None, ProfileSettings or
    None); UserError for the first bad one."""
    from thundervis import runner
    from thundervis.commands.profile_options import profile_settings
    executors = parse_executors(args.executors)
    if check_target:
        runner.check_target(script, module)
    return executors, profile_settings(args)


def target_stem(script: Optional[str], module: Optional[str]) -> str:
    """Return the name default outputs are given after the target: the script's file name without
    its extension, or the module's last component."""
    return os.path.splitext(os.path.basename(script))[0] if script else module.rsplit(".", 1)[-1]


def shown_path(path: str) -> str:
    """Return ``path`` as shown to the user: relative to the working directory when it is below
    it, else as given."""
    return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
