"""Multi-process runs: launch a recorded job through ``torch.distributed.run`` (torchrun).

:func:`launch_group` records the launch in the group folder (``launch-nodeN.json``, see
:mod:`thundervis.recording.group`), runs torchrun in this process with the user's torchrun options
and :mod:`thundervis.commands.rank_worker` as the workers' module, then records how the job ended:
``ok``, or ``failed`` with each failed rank's exit code or signal (torchrun stops the other workers
when one fails; they record ``interrupted``), or ``interrupted`` when the launcher itself was
stopped. Every rank's recording is closed by its own worker, so whatever happens to one rank the
others' recordings stay readable.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Sequence

from thundervis.errors import UserError
from thundervis.safe_text import visible_line
from thundervis.recording import group as group_store


@dataclass(frozen=True)
class GroupResult:
    """How a launch ended: exit code, status, the group folder and the failed ranks' details."""

    exit_code: int
    status: str
    path: str
    failures: tuple


def check_torchrun_args(torchrun_args: Sequence[str]) -> None:
    """Parse the torchrun options with torchrun's own parser; UserError (one sentence) when it
    refuses them."""
    from torch.distributed.run import parse_args
    import contextlib
    import io
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse_args([*torchrun_args, "-m", "thundervis.commands.rank_worker"])
    except SystemExit:
        last = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        why = last[-1].split("error:", 1)[-1].strip() if last else "invalid option"
        raise UserError(f"torchrun refused the options: {why}.") from None
    # The values torchrun's parser lets through but its launch asserts on (0 processes, nnodes
    # 0 or 2:1, ...): checked the way the launch reads them, before any group folder exists.
    from torch.distributed.run import config_from_args
    saved = dict(os.environ)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # config_from_args would set it and warn
    try:
        config, _, _ = config_from_args(parse_args([*torchrun_args, "-m", "thundervis.commands.rank_worker"]))
    except (AssertionError, ValueError, TypeError, RuntimeError) as e:
        why = visible_line(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        raise UserError(f"torchrun refused the options: {why}.") from None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if config.nproc_per_node < 1:
        raise UserError(f"--nproc-per-node must be at least 1 (got {config.nproc_per_node}).")


def launch_group(*, group_dir: str, torchrun_args: Sequence[str], run_args: Sequence[str],
                 target: Sequence[str], node_rank: int = 0) -> GroupResult:
    """Run ``run_args`` (``thundervis run`` arguments ending with the target and its arguments)
    under torchrun with ``torchrun_args``, one recording per rank in ``group_dir``; return how it
    ended. ``target`` is what the user asked to run (recorded in the launch file)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    launch = group_store.start_launch(group_dir, node_rank=node_rank, torchrun_args=list(torchrun_args),
                                      target=list(target), cwd=os.getcwd())
    argv = [*torchrun_args, "-m", "thundervis.commands.rank_worker", "--group", group_dir, "--", *run_args]
    status, code, failures = "ok", 0, []
    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        status, code = "failed", 1
        for rank, f in sorted(e.failures.items()):
            sig = None
            try:
                sig = f.signal_name() if f.exitcode is not None and f.exitcode < 0 else None
            except Exception:
                pass
            failures.append({"rank": int(rank), "local_rank": getattr(f, "local_rank", None),
                             "exit_code": f.exitcode, "signal": sig})
        first = failures[0]["exit_code"] if failures else 1
        code = first if isinstance(first, int) and first > 0 else 1
    except KeyboardInterrupt:
        status, code = "interrupted", 130
    except Exception as e:  # torchrun's SignalException (SIGTERM to the launcher), rendezvous errors
        name = type(e).__name__
        status = "interrupted" if name == "SignalException" else "failed"
        code = 128 + 15 if status == "interrupted" else 1
        print(f"thundervis: torchrun stopped: {name}: {e}", file=sys.stderr)
        failures.append({"rank": None, "error": f"{name}: {e}"})
    group_store.finish_launch(launch, status=status, exit_code=code, failures=failures)
    return GroupResult(code, status, os.path.abspath(group_dir), tuple(failures))


def check_group_output(path: str, node_rank: int) -> str:
    """Create the group folder (or accept the one another node of the same job created) and return
    its absolute path; UserError when it is a file or this node's launch is already recorded."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"output {path} is a file; a multi-process run writes a folder (one recording per rank).")
    if os.path.exists(os.path.join(path, group_store.launch_file_name(node_rank))):
        raise UserError(f"output {path} already holds a run of node {node_rank}; choose another name or remove it.")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output folder {path} ({e.strerror}).") from None
    if not os.access(path, os.W_OK):
        raise UserError(f"cannot write the recordings to {path} (permission denied).")
    return path
