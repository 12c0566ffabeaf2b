"""Ahead-of-time compilation cost: ``thundervis run --target sm_90`` against ``thundervis run`` on
the GPT example, both measured in this process's run, as subprocesses, alternating.

Prints the kernels, the distinct kernels (identical layers share one build), the builds, failures
and spills, the AOT seconds (from the first build submitted to the last finished, as the run
recorded it), the cold run's timeline (when the kernels reached the workers, when the script
ended, when the last build finished), the wall time of each run (medians over ``--repeat``) and
the ratio with / without (target <= 1.3), cold and warm, the CPU seconds each run used with its
compile workers and their tools (less sensitive than wall time to other programs on a shared
machine), and how long ``thundervis asm`` takes to answer.

Cold is what a user gets on a fresh machine: both runs start with empty caches (Triton's compile
cache and thundervis's own, ``$THUNDERVIS_CACHE_DIR``: generated kernel files and the
disassembly of each cubin). Warm is the same command again: each run reuses the caches its cold
run filled. The exit status is the cold ratio's verdict.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 1.3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")


def timed_run(out: str, extra: list[str], caches: str) -> tuple[float, float]:
    """Run ``thundervis run`` on the example with its caches under ``caches``; return its wall
    seconds and the CPU seconds it and its compile workers and tools used."""
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
    env["THUNDERVIS_CACHE_DIR"] = os.path.join(caches, "thundervis")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "--out", out, *extra, EXAMPLE],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> int:
    """Measure and print; return 0 when the cold ratio meets the target, 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="aot-bench-")
    times = {(kind, cache): [] for kind in ("plain", "target") for cache in ("cold", "warm")}
    cpu = {key: [] for key in times}
    path = None
    for i in range(args.repeat):
        for cache in ("cold", "warm"):  # warm: the same caches the cold runs filled
            for kind, extra in (("plain", ["--target", "none"]), ("target", ["--target", args.target])):
                out = os.path.join(folder, f"{kind}-{cache}{i}.tvrec")
                wall, used = timed_run(out, extra, os.path.join(folder, f"{kind}{i}"))
                times[kind, cache].append(wall)
                cpu[kind, cache].append(used)
            path = out if cache == "cold" else path
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
          f"AOT {stats.get('seconds')} s from start to the last build (cold run)")
    print(f"at the script's end {stats.get('pending_at_end')} distinct builds were pending; the run waited "
          f"{stats.get('waited_s')} s for them (cold run)")
    handed = stats.get("handed_s") or []
    if len(handed) == 2 and stats.get("finish_called_s") is not None:
        # Builds can only start once their kernels exist: on few cores this, not the build
        # speed alone, sets the wait at the end.
        print(f"timeline (cold)    seconds after the workers started: kernels handed to them "
              f"{handed[0]:.2f}-{handed[1]:.2f} s, the script ended {stats['finish_called_s']:.2f} s, "
              f"the last build finished {stats.get('seconds')} s")
    ratios = {}
    for cache in ("cold", "warm"):
        p, t = statistics.median(times["plain", cache]), statistics.median(times["target", cache])
        ratios[cache] = t / p
        print(f"{cache} caches        run {p:.2f} s, run --target {args.target} {t:.2f} s: "
              f"{t / p:.2f}x  (target <= {TARGET}x; medians of {args.repeat})")
        pc, tc = statistics.median(cpu["plain", cache]), statistics.median(cpu["target", cache])
        print(f"{cache} CPU           run {pc:.2f} s, run --target {args.target} {tc:.2f} s (the run, its "
              f"compile workers and their tools): {tc - pc:+.2f} s")
    if first:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "thundervis", "asm", path, first, "--stage", "sass"],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"thundervis asm     {time.perf_counter() - t0:.2f} s (whole process, {first} sass)")
    print(f"machine            {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    return 0 if ratios["cold"] <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
