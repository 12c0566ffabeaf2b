"""Ahead-of-time compilation cost: ``thundervis run --target sm_90`` against ``thundervis run`` on
the GPT example, both measured in this process's run, as subprocesses, alternating.

Prints the kernels, the distinct kernels (identical layers share one build), the builds, failures
and spills, the AOT seconds (from the first build submitted to the last finished, as the run
recorded it), the wall time of each run (medians over ``--repeat``) and the ratio with / without
(target <= 1.3), and how long ``thundervis asm`` takes to answer. Triton's compile cache is a fresh
folder for every ``--target`` run (cold builds) unless ``--warm-cache`` (an untimed run fills one
cache first: the second ``run --target`` of the same script).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 1.3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")


def timed_run(out: str, extra: list[str], env: dict) -> float:
    """Run ``thundervis run`` on the example; return its wall seconds."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "--out", out, *extra, EXAMPLE],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    """Measure and print; return 0 when the ratio meets the target, 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warm-cache", action="store_true", help="reuse Triton's compile cache between runs")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="aot-bench-")
    base = {k: v for k, v in os.environ.items()}
    plain, targeted = [], []
    path = None
    if args.warm_cache:  # one untimed run fills Triton's cache: the timed ones measure warm builds
        env = dict(base)
        env["TRITON_CACHE_DIR"] = os.path.join(folder, "triton-cache")
        timed_run(os.path.join(folder, "warmup.tvrec"), ["--target", args.target], env)
    for i in range(args.repeat):
        plain.append(timed_run(os.path.join(folder, f"plain{i}.tvrec"), ["--target", "none"], base))
        env = dict(base)
        env["TRITON_CACHE_DIR"] = os.path.join(folder, "triton-cache" if args.warm_cache else f"triton-cache{i}")
        path = os.path.join(folder, f"target{i}.tvrec")
        targeted.append(timed_run(path, ["--target", args.target], env))
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        builds = rec.kernel_builds()
        stats = next((e.data for e in rec.events("aot_finished")), {})
        kernels = len(rec.kernels())
        first = rec.kernels()[0].name if kernels else None
    ok = [b for b in builds if b.status == "ok"]
    print(f"kernels            {kernels}")
    print(f"distinct kernels   {stats.get('distinct')}")
    print(f"builds             {len(ok)} ok, {len(builds) - len(ok)} not ok "
          f"({', '.join(sorted({b.status for b in builds if b.status != 'ok'})) or 'none'})")
    print(f"spills             {sum(b.spills or 0 for b in ok)} (kernels with spills: "
          f"{sum(1 for b in ok if b.spills)})")
    print(f"build seconds      {sum(b.seconds or 0 for b in builds):.1f} summed over builds; "
          f"AOT {stats.get('seconds')} s from start to the last build")
    p, t = statistics.median(plain), statistics.median(targeted)
    ratio = t / p
    print(f"run                {p:.2f} s   (thundervis run, median of {len(plain)})")
    print(f"run --target {args.target:<6}{t:.2f} s")
    print(f"ratio              {ratio:.2f}x  (target <= {TARGET}x)")
    if first:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "thundervis", "asm", path, first, "--stage", "sass"],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"thundervis asm     {time.perf_counter() - t0:.2f} s (whole process, {first} sass)")
    print(f"machine            {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
