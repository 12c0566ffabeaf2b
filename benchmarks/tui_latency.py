"""TUI latency: cold start of ``thundervis view REC`` to first paint, and stepping to the next pass
with a diff shown.

A synthetic recording (``--symbols`` ops per trace, 12 passes, forward and backward chains) is
written through the real writer. Then:

- cold start: ``thundervis view REC`` runs in a pseudo-terminal (160x48), a new process each round;
  the clock runs from spawning it until the trace's header line is on the terminal (the output,
  escape sequences stripped, contains it). ``python -c pass`` in the same pty is the baseline
  (process start alone). Target: under 1 s wall, process start included.
- step: in process, ``App.run_test()``; the diff against the previous pass is on; each round presses
  ``n``; the clock stops when the trace view has drawn the last screen line of the next pass's diff. "warm" is what a user gets (the app
  prepares the neighbouring passes in a worker while the current one is read); "cold" drops every
  memoised trace and diff first (load, validate, diff and fold in the worker). Target: warm
  under 100 ms.

    python benchmarks/tui_latency.py [--symbols 10000] [--rounds 5] [--rec PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _cpu_s(pid: int) -> float:
    """Return the CPU seconds (user + system) process ``pid`` has used so far (Linux /proc)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def in_pty(argv: list[str], marker: bytes, timeout: float = 60.0, quit_key: bytes = b"q") -> tuple[float, float]:
    """Run ``argv`` in a 160x48 pseudo-terminal; return (wall seconds, CPU seconds of the process)
    until ``marker`` appears in its output (escape sequences stripped), then send ``quit_key`` and
    wait for it to exit."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                            close_fds=True)
    os.close(slave)
    seen, found = b"", None
    try:
        while time.perf_counter() - start < timeout:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:
                    break
                seen += chunk
                if marker in ANSI.sub(b"", seen[-200_000:]):
                    found = time.perf_counter() - start
                    cpu = _cpu_s(proc.pid)
                    break
            elif proc.poll() is not None:
                break
        if found is None:
            raise RuntimeError(f"{argv[-2:]} never showed {marker!r}; last output: "
                               f"{ANSI.sub(b'', seen[-600:])!r}")
        os.write(master, quit_key)
        end = time.perf_counter() + 20
        while proc.poll() is None and time.perf_counter() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    os.read(master, 1 << 16)
                except OSError:
                    break
        return found, cpu
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)


def cold_start(rec: str, rounds: int) -> tuple[list, list]:
    """Return ((wall, cpu) seconds to first paint per round, the same for a ``python -c``
    baseline), interleaved."""
    exe = shutil.which("thundervis")
    view = [exe, "view", rec] if exe else [sys.executable, "-m", "thundervis", "view", rec]
    base = [sys.executable, "-c", "print('ready')"]
    paints, bases = [], []
    for _ in range(rounds):
        bases.append(in_pty(base, b"ready", quit_key=b""))
        paints.append(in_pty(view, b'after "codegen"'))
    return paints, bases


async def steps(rec: str, rounds: int) -> tuple[list[float], list[float]]:
    """Return (warm step seconds, cold step seconds) for next-pass-with-diff."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.data import open_data
    from thundervis.tui.trace_pane import content_ready

    app = ThundervisApp(open_data(rec), poll_s=0)

    async def idle(pilot):
        # A user reading the pass: the app's idle timers fire and its workers finish.
        from thundervis.tui.details_pane import IDLE_S
        await pilot.pause(2 * IDLE_S + 0.1)
        while not app.loaded or any(w.is_running for w in app.workers):
            await pilot.pause(0.01)

    warm, cold = [], []
    async with app.run_test(size=(160, 48)) as pilot:
        await idle(pilot)
        passes = [p.index for p in app.current_chain().passes]
        for r in range(2 * rounds):
            is_cold = r % 2 == 1
            app.go_to_pass(passes[r % (len(passes) - 1)])
            if app.state.diff_from is None:
                await pilot.press("d")
            await idle(pilot)
            target = passes[r % (len(passes) - 1) + 1]
            if is_cold:
                app.data.forget()
            else:  # the user read the pass long enough for the app to prepare the next one
                while not content_ready(app.data, app.state.graph, app.state.chain, target, app.state.index, False, True):
                    await pilot.pause(0.01)
                await idle(pilot)  # the rest of the preparation (the previous pass) finishes too
            view = app.query_one("LinesView")
            t0, c0 = time.perf_counter(), time.thread_time()
            await pilot.press("n")
            while not (app.loaded and app.state.index == target and view.painted_at is not None
                       and view.painted_at > t0):
                await pilot.pause(0.001)
            # wall: key to the new diff drawn (its last screen line); CPU: the UI thread's, until the
            # press and the polling here are done (an upper bound)
            (cold if is_cold else warm).append((view.painted_at - t0, time.thread_time() - c0))
            assert app.query_one("LinesView").mode == "unified"
    app.data.close()
    return warm, cold


def main() -> int:
    """Run the benchmark and print the numbers."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--symbols", type=int, default=10_000, help="ops per trace (default 10000)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rec", help="use this recording instead of generating one")
    args = p.parse_args()
    folder = tempfile.mkdtemp(prefix="tui_latency_")
    rec = args.rec
    if rec is None:
        from _synthetic_recording import write_recording
        t = time.perf_counter()
        rec = write_recording(os.path.join(folder, "synthetic.tvrec"), n_symbols=args.symbols)
        print(f"synthetic recording: {args.symbols} symbols per trace, 12 passes, forward + backward, "
              f"{os.path.getsize(rec) / 1e6:.1f} MB, written in {time.perf_counter() - t:.1f} s")
    paints, bases = cold_start(rec, args.rounds)
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    med_paint, med_base = med(paints, 0), med(bases, 0)
    print(f"cold start to first paint (thundervis view, pty 160x48): wall median {med_paint * 1e3:.0f} ms, "
          f"min {min(p[0] for p in paints) * 1e3:.0f} ms over {len(paints)} runs  [target < 1000 ms]")
    print(f"  CPU time of the process until then: median {med(paints, 1) * 1e3:.0f} ms "
          f"(the wall time of an idle machine; this one may be shared)")
    print(f"  python -c baseline in the same pty: wall median {med_base * 1e3:.0f} ms, CPU {med(bases, 1) * 1e3:.0f} ms;"
          f" view / baseline = {med_paint / med_base:.2f} (wall), {med(paints, 1) / med(bases, 1):.2f} (CPU)")
    warm, cold = asyncio.run(steps(rec, args.rounds))
    print(f"next pass with diff (App.run_test, 160x48): warm wall median {med(warm, 0) * 1e3:.1f} ms, "
          f"max {max(w[0] for w in warm) * 1e3:.1f} ms  [target < 100 ms]")
    print(f"  UI thread CPU time per warm step (to the end of the key's handling): median {med(warm, 1) * 1e3:.1f} ms, "
          f"max {max(w[1] for w in warm) * 1e3:.1f} ms")
    print(f"  cold (nothing memoised: load + validate + diff in the worker): wall median "
          f"{med(cold, 0) * 1e3:.0f} ms, max {max(c[0] for c in cold) * 1e3:.0f} ms; "
          f"cold / warm = {med(cold, 0) / med(warm, 0):.1f}")
    print(f"  load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    ok = med_paint < 1.0 and med(warm, 0) < 0.1
    print("targets met" if ok else "targets NOT met")
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
