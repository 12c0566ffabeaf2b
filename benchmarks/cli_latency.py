"""CLI latency: wall time of ``thundervis ls REC`` and ``thundervis show REC`` next to ``python -c pass``.

Each command is started as a fresh process ``--repeat`` times, interleaved (pass, ls, show, pass,
...), so all three see the same machine load; the medians are printed with the difference to bare
Python start-up. Target: ``ls`` within 0.4 s of ``python -c pass`` (the reading commands import
neither torch nor Triton). Without ``--rec``, a recording of ``examples/train_mlp.py`` (torch
executor) is made first in a temporary folder.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 0.4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli() -> list[str]:
    exe = shutil.which("thundervis")
    return [exe] if exe else [sys.executable, "-m", "thundervis"]


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def make_recording(folder: str) -> str:
    """Record ``examples/train_mlp.py`` with the torch executor into ``folder``; return the path."""
    out = os.path.join(folder, "mlp.tvrec")
    subprocess.run(_cli() + ["run", "--out", out, "--executors", "torch", "--no-view",
                             os.path.join(ROOT, "examples", "train_mlp.py")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def main() -> int:
    """Measure and print; return 0 when ``ls`` meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rec", help="a recording to read (default: record examples/train_mlp.py first)")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rec = args.rec or make_recording(tmp)
        commands = {"python -c pass": [sys.executable, "-c", "pass"],
                    "thundervis ls REC": _cli() + ["ls", rec],
                    "thundervis show REC": _cli() + ["show", rec, "--plain"]}
        for cmd in commands.values():  # warm the page cache and .pyc files
            _wall(cmd)
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                times[name].append(_wall(cmd))
    base = statistics.median(times["python -c pass"])
    print(f"recording: {args.rec or 'examples/train_mlp.py (torch executor)'}; {args.repeat} runs each, medians")
    for name, samples in times.items():
        med = statistics.median(samples)
        extra = "" if name.startswith("python") else f"   (+{med - base:.3f} s over python -c pass)"
        print(f"{name:<22} {med:7.3f} s{extra}")
    over = statistics.median(times["thundervis ls REC"]) - base
    ok = over <= TARGET_S
    print(f"ls - bare python = {over:.3f} s, target <= {TARGET_S} s: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
