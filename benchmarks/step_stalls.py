"""Step stalls: the worst training step under thundervis against its median step and against plain
eager, in one run.

Each model (``_stall_driver.py``: the repo's example GPT, tiny random-init GPT-2 and Llama from
``transformers`` configs) trains under ``thundervis run`` for ``--seconds`` (at least
``--min-steps`` steps, long enough for hot CPU regions to be built by Inductor off the training
thread and swapped in), then eagerly for as many steps. Steps 0 and 1 compile the graphs and are
left out (they are the compile, not a stall). Printed per model: the median step, the worst step
and where it was, worst / median (target <= 3) and worst minus eager's median step (target <= 2 s),
and from the recording what the CPU path did meanwhile: regions sent to the build worker, swapped
to Inductor, kept on torch by measurement, failed, and still building at the end; then which
CPU-path events fell within the worst step, and the slowest step that took a finished build (the
driver prints each step's start time, the recording's clock).

    python benchmarks/step_stalls.py [--models gpt,gpt2,llama] [--seconds 60]
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RATIO_TARGET, OVER_EAGER_TARGET_S = 3.0, 2.0
BUILDING_TARGET = 1.5  # the median step while regions build, over eager's median step
COMPILE_STEPS = 2


def _steps(stdout: str) -> list[float]:
    """The ``step I MS [START]`` lines' milliseconds, in order."""
    return [ms for ms, _ in _timed_steps(stdout)]


def _timed_steps(stdout: str) -> list[tuple[float, float]]:
    """The ``step I MS [START]`` lines' (milliseconds, start time or 0.0), in order."""
    out = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) in (3, 4) and parts[0] == "step":
            out.append((float(parts[2]), float(parts[3]) if len(parts) == 4 else 0.0))
    return out


def events_during(rec: str, start: float, ms: float) -> str:
    """Say which ``cpu_build`` / ``kernel_path`` events of recording ``rec`` fell within the step that
    began at ``start`` (``time.time()``) and took ``ms``: what the CPU path did in a slow step."""
    with sqlite3.connect(f"file:{rec}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT event, data FROM events WHERE event IN ('cpu_build', 'kernel_path') AND at >= ? "
                         "AND at <= ? ORDER BY id", (start, start + ms / 1e3)).fetchall()
    seen: dict = {}
    for event, data in rows:
        d = json.loads(data)
        what = d.get("state") if event == "cpu_build" else str(d.get("why", "")).split(" (")[0].split(";")[0][:60]
        seen[f"{event}:{what}"] = seen.get(f"{event}:{what}", 0) + 1
    return ", ".join(f"{k} x{n}" for k, n in seen.items()) or "no CPU-path event"


def _run(cmd: list, env: dict, timeout: float) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[-4:])} failed ({done.returncode}): {done.stderr[-1500:]}")
    return done.stdout


def cpu_path_summary(rec: str) -> dict:
    """Count what the CPU path did in recording ``rec`` (its ``cpu_build`` / ``kernel_path`` events)."""
    with sqlite3.connect(f"file:{rec}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT graph_id, chain, event, data FROM events WHERE event IN ('cpu_build', 'kernel_path')"
                         " ORDER BY id").fetchall()
    building, last = set(), {}
    counts = {"sent": 0, "inductor": 0, "torch_measured": 0, "failed": 0}
    for graph, chain, event, data in rows:
        d = json.loads(data)
        key = (graph, chain, d.get("kernel"))
        if event == "cpu_build":
            if d.get("state") == "building":
                counts["sent"] += 1
                building.add(key)
            else:
                building.discard(key)
        else:
            last[key] = d
    for d in last.values():
        if d.get("samples_us"):
            counts["inductor" if d.get("via") == "inductor" else "torch_measured"] += 1
        elif str(d.get("why", "")).startswith("inductor failed"):
            counts["failed"] += 1
    counts["building_at_end"] = len(building)
    return counts


def worst_taking_step(rec: str, timed: list, median: float) -> str:
    """Say the slowest step after the compile steps in which a finished build was taken (a
    ``cpu_build`` event ``built`` or ``failed`` fell within it): what taking built code costs a step."""
    with sqlite3.connect(f"file:{rec}?mode=ro", uri=True) as c:
        times = sorted(at for (at,) in c.execute(
            "SELECT at FROM events WHERE event = 'cpu_build' AND json_extract(data, '$.state') != 'building'"))
    worst, taken = None, 0
    for i, (ms, start) in enumerate(timed[COMPILE_STEPS:], COMPILE_STEPS):
        k = bisect.bisect_left(times, start)
        if k < len(times) and times[k] <= start + ms / 1e3:
            taken += 1
            worst = max(worst or (0.0, 0), (ms, i))
    if worst is None:
        return "no build was taken"
    return f"{taken} steps took a build; the slowest, step {worst[1]}: {worst[0]:.1f} ms ({worst[0] / median:.2f}x median)"


def build_window(rec: str) -> tuple:
    """Return (first, last, done) of recording ``rec``'s ``cpu_build`` events: when the first region
    was sent to the build worker, the time of the last event, and whether every build sent was
    answered by then ((None, None, True) when nothing was sent)."""
    with sqlite3.connect(f"file:{rec}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT graph_id, chain, json_extract(data, '$.kernel'), json_extract(data, '$.state'), at "
                         "FROM events WHERE event = 'cpu_build' ORDER BY id").fetchall()
    if not rows:
        return None, None, True
    building = set()
    for graph, chain, kernel, state, _ in rows:
        (building.add if state == "building" else building.discard)((graph, chain, kernel))
    return rows[0][4], rows[-1][4], not building


def building_steps(timed: list, window: tuple) -> list[float]:
    """The milliseconds of the steps after the compile steps that began while builds were under
    way: from the first request to the last answer, or to the run's end if one was never answered."""
    first, last, done = window
    if first is None:
        return []
    return [ms for ms, start in timed[COMPILE_STEPS:] if start + ms / 1e3 >= first and (not done or start <= last)]


def _window_s(window: tuple, timed: list) -> Optional[float]:
    """Seconds from the first build request to the last answer, or to the last step's end."""
    first, last, done = window
    if first is None:
        return None
    return (last if done else timed[-1][1] + timed[-1][0] / 1e3) - first


def measure(model: str, seconds: float, min_steps: int, tmp: str) -> dict:
    """Run ``model`` under thundervis, then eagerly; return the numbers of one row."""
    env = dict(os.environ, THUNDERVIS_CACHE_DIR=os.path.join(tmp, "cache"), THUNDERVIS_STALL_TRACE="1")
    driver = os.path.join(HERE, "_stall_driver.py")
    rec = os.path.join(tmp, f"{model}.tvrec")
    timed = _timed_steps(_run([sys.executable, "-m", "thundervis", "run", "--no-view", "--no-cache", "-o", rec, driver,
                               model, "--seconds", str(seconds), "--min-steps", str(min_steps)], env,
                              timeout=seconds + 600))
    tv = [ms for ms, _ in timed]
    eager = _steps(_run([sys.executable, driver, model, "--eager", "--seconds", "0",
                         "--min-steps", str(min(len(tv), 60))], env, timeout=600))
    body = tv[COMPILE_STEPS:]
    window = build_window(rec)
    during = building_steps(timed, window)
    worst = max(body)
    median = statistics.median(body)
    eager_median = statistics.median(eager[1:])
    return {"model": model, "steps": len(tv), "median_ms": median, "worst_ms": worst,
            "worst_step": COMPILE_STEPS + body.index(worst), "ratio": worst / median,
            "over_eager_s": (worst - eager_median) / 1e3, "eager_ms": eager_median,
            "compile_s": sum(tv[:COMPILE_STEPS]) / 1e3, **cpu_path_summary(rec),
            "building_ms": statistics.median(during) if during else None, "building_steps": len(during),
            "window_s": _window_s(window, timed), "builds_done": window[2],
            "worst_during": events_during(rec, timed[COMPILE_STEPS + body.index(worst)][1], worst),
            "taking": worst_taking_step(rec, timed, median)}


def _window_line(r: dict) -> str:
    """Say how the steps fared while regions built, against eager's median (target <= 1.5x)."""
    if r["building_ms"] is None:
        return "no region was sent to the build worker"
    ratio = r["building_ms"] / r["eager_ms"]
    span = (f"all answered {r['window_s']:.1f} s after the first request" if r["builds_done"] else
            f"{r['building_at_end']} still building at the run's end, {r['window_s']:.1f} s after the first request")
    return (f"while regions built: median step {r['building_ms']:.1f} ms over {r['building_steps']} steps, "
            f"{ratio:.2f}x eager's (target <= {BUILDING_TARGET:g}x); {span}")


def main() -> int:
    """Measure each model and print the table (see the module doc)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt,gpt2,llama")
    p.add_argument("--seconds", type=float, default=60.0, help="training time under thundervis per model")
    p.add_argument("--min-steps", type=int, default=40)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tv-stalls-") as tmp:
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            try:
                rows.append(measure(model, args.seconds, args.min_steps, tmp))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                print(f"{model}: not measured: {str(e).splitlines()[0][:300]}")
    print(f"{'model':<7} {'steps':>5} {'compile s':>9} {'median ms':>9} {'worst ms':>9} {'at':>4} "
          f"{'worst/med':>9} {'eager ms':>8} {'worst-eager s':>13}  cpu regions: sent/inductor/torch/failed/building")
    ok = True
    for r in rows:
        met = r["ratio"] <= RATIO_TARGET or r["over_eager_s"] <= OVER_EAGER_TARGET_S
        ok = ok and met
        print(f"{r['model']:<7} {r['steps']:>5} {r['compile_s']:>9.1f} {r['median_ms']:>9.1f} {r['worst_ms']:>9.1f} "
              f"{r['worst_step']:>4} {r['ratio']:>9.2f} {r['eager_ms']:>8.1f} {r['over_eager_s']:>13.2f}  "
              f"{r['sent']}/{r['inductor']}/{r['torch_measured']}/{r['failed']}/{r['building_at_end']}"
              f"{'' if met else '  <- stall'}")
        print(f"        during the worst step: {r['worst_during']}; {r['taking']}")
        print(f"        {_window_line(r)}")
    print(f"target: no step after the compile steps more than {RATIO_TARGET:g}x the median step or "
          f"{OVER_EAGER_TARGET_S:g} s over eager's: {'met' if ok and rows else 'NOT met'}")
    return 0 if ok and rows else 1


if __name__ == "__main__":
    sys.exit(main())
