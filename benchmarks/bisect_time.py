"""Time of ``thundervis bisect REC --chain forward`` on the GPT example, against the 10 s target.

The target is absolute (issue 21: bisect on the example's forward chain under 10 s on CPU), so this
prints absolute times, stated as such: the wall time of the whole command as a user runs it (a
fresh process: Python and torch start-up included) and its CPU time (user + system of the child,
less sensitive to other processes on a shared machine), the median of ``--repeat`` runs, next to
``python -c "import torch"`` measured in the same run (the part of it that is start-up).

Without ``--rec``, the example is recorded first, as the README says:
``thundervis run --no-view --check-numerics --capture-inputs -o REC examples/train_gpt.py``.

Usage: ``python benchmarks/bisect_time.py [--rec REC] [--chain forward] [--repeat 3]``.
Exit 1 when the median wall time is above the target.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 10.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli() -> list[str]:
    exe = shutil.which("thundervis")
    return [exe] if exe else [sys.executable, "-m", "thundervis"]


def _timed(cmd: list[str], ok_codes=(0,)) -> tuple[float, float]:
    """Run ``cmd``; return (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok_codes:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def make_recording(folder: str) -> str:
    """Record ``examples/train_gpt.py`` with its chain inputs captured; return the path."""
    out = os.path.join(folder, "gpt.tvrec")
    env = {**os.environ, "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")}
    subprocess.run(_cli() + ["run", "--no-view", "--check-numerics", "--capture-inputs", "-o", out,
                             os.path.join(ROOT, "examples", "train_gpt.py")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return out


def main(argv=None) -> int:
    """Measure and print; return 0 when the median wall time meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rec", help="a recording made with --capture-inputs (default: record the example first)")
    p.add_argument("--chain", default="forward", help="the chain to bisect (default forward)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="thundervis-bisect-") as tmp:
        rec = args.rec or make_recording(tmp)
        bisect = _cli() + ["bisect", rec, "--chain", args.chain]
        start = [sys.executable, "-c", "import torch"]
        _timed(start)  # warm the page cache and .pyc files
        walls, cpus, start_walls = [], [], []
        for _ in range(max(1, args.repeat)):
            w, c = _timed(bisect, ok_codes=(0, 1))  # 1: a divergence was found, still a bisect
            walls.append(w)
            cpus.append(c)
            start_walls.append(_timed(start)[0])
    wall, cpu, base = statistics.median(walls), statistics.median(cpus), statistics.median(start_walls)
    print(f"thundervis bisect REC --chain {args.chain} (median of {len(walls)}): "
          f"{wall:.2f} s wall, {cpu:.2f} s CPU")
    print(f"python -c 'import torch' (start-up, same run):        {base:.2f} s wall")
    print(f"absolute target: under {TARGET_S:.0f} s wall on CPU: {'met' if wall < TARGET_S else 'NOT met'}")
    return 0 if wall < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
