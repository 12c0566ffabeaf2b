"""Overhead of ``thundervis run --check-numerics`` on the GPT example's training step, on this machine.

Two copies of the same model are compiled in this one run with the same (default) executors and a
recording each: one plain, one with the numerics checks on for the first K = 3 calls of each chain
(``ProfileSettings(check_steps=3, checker=KernelChecker())``, what ``--check-numerics --check-steps
3`` builds). Their steps run in turn (plain, checked, plain, ...), so both see the same load of a
shared machine. Step 0 compiles (both), steps 1 and 2 are checked steps without compiling (two samples
per repeat), steps 3.. run after the checks. Prints the median step times and two ratios measured here:

- checked step / plain step (target: at most 3x on CPU), with each repeat's own ratio (how far
  one run's reading moves on this machine), and the same as the time the checks add (checked -
  plain, in plain steps),
- step after the checks / plain step (target: within noise, about 1.0x).

Then where the added time goes per checked step: each part of the checks (the kernels' inputs
raised to float64, the float64 reference, eager float32, judging; ``KernelChecker(spent)``) and the
rest (the hooks around each kernel, recording the rows, what the checks cost the model's own ops).

Also prints the same ratios in process CPU time (steadier than the wall clock on a shared machine).

Usage: ``python benchmarks/numerics_overhead.py [--steps N] [--repeats R] [--threads T] [--profile]``.
Informative: prints the ratios and whether they meet the targets; exit 1 when the first one (wall
clock) is above 3.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TRITON_INTERPRET", "1")
CHECK_STEPS = 3  # step 0 compiles; steps 1 .. CHECK_STEPS - 1 are the measured checked steps


class _Model:
    """One compiled copy of the model (plain or checked) with its recording and optimizer."""

    def __init__(self, check: bool, folder: str, tag: str):
        import torch
        from _gpt_model import build
        from thundervis.compiler import ThundervisCompiler
        from thundervis.compiler.profiling import ProfileSettings
        from thundervis.recording import RecordingObserver
        self.tag, self.check, self.path = tag, check, os.path.join(folder, f"{tag}.tvrec")
        self.model, self.batches, _ = build(0)
        self.rec = RecordingObserver(self.path)
        self.rec.start_run(script=None, module="numerics_overhead", argv=[], cwd=folder, executors=None)
        profile = None
        self.spent: dict = {}        # the checks' seconds per part, summed over the run (check_region)
        self.parts: list[dict] = []  # per step: the seconds each part of the checks took in it
        if check:
            from thundervis.numerics_check import KernelChecker
            profile = ProfileSettings(timing=False, check_steps=CHECK_STEPS, checker=KernelChecker(self.spent))
        self.run = torch.compile(self.model, backend=ThundervisCompiler(observer=self.rec, profile=profile),
                                 dynamic=False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.times, self.cpu = [], []

    def step(self, i: int, profile: bool = False) -> None:
        """Run training step ``i`` and keep its wall and process CPU time; ``profile``: print a
        cProfile of it."""
        from _gpt_model import train_step
        prof = None
        if profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        before = dict(self.spent)
        t0, c0 = time.perf_counter(), time.process_time()
        train_step(self.run, self.model, self.opt, self.batches[i % len(self.batches)])
        self.times.append(time.perf_counter() - t0)
        self.cpu.append(time.process_time() - c0)
        self.parts.append({k: v - before.get(k, 0.0) for k, v in self.spent.items()})
        if prof is not None:
            prof.disable()
            import pstats
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)

    def close(self) -> None:
        self.rec.finish_run("ok", 0)
        self.rec.close()
        if self.check:
            from thundervis.recording import open_recording
            with open_recording(self.path) as r:
                checks = r.kernel_numerics()
            flagged = [k.kernel for k in checks if k.flagged]
            print(f"  ({self.tag}: {len(checks)} kernels checked, {len(flagged)} flagged)")


def _paired_steps(steps: int, folder: str, r: int, profile: bool) -> tuple:
    """Compile a plain and a checked copy of the model and run their steps in turn (plain i,
    checked i, plain i + 1, ...), so both see the same load of a shared machine; return
    ``((plain wall, plain cpu), (checked wall, checked cpu))`` per step."""
    import torch
    torch._dynamo.reset()
    plain, checked = _Model(False, folder, f"plain{r}"), _Model(True, folder, f"checked{r}")
    for i in range(steps):
        first, second = (plain, checked) if i % 2 == 0 else (checked, plain)
        first.step(i, profile and first is checked and i == 1)
        second.step(i, profile and second is checked and i == 1)
    plain.close()
    checked.close()
    return (plain.times, plain.cpu), (checked.times, checked.cpu, checked.parts)


def _print_parts(parts: list, added: float, plain: float) -> None:
    """Print where the checks' added time goes: the median seconds of each part of
    ``check_region`` per checked step (``parts``), each in ms and in plain steps, and the rest
    (the hooks around each kernel, recording the rows, the cache and allocator effects)."""
    from thundervis.numerics_check import CHECK_PARTS
    if not parts or plain <= 0:
        return
    measured = 0.0
    print("where the added time goes (median per checked step):")
    for name in CHECK_PARTS:
        v = statistics.median(p.get(name, 0.0) for p in parts)
        measured += v
        print(f"  {name:22s}{v * 1e3:7.2f} ms  {v / plain:5.2f} plain steps")
    rest = added - measured
    print(f"  {'hooks, recording, rest':22s}{rest * 1e3:7.2f} ms  {rest / plain:5.2f} plain steps")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8, help="training steps per model (default 8, at least 5)")
    p.add_argument("--repeats", type=int, default=2, help="plain/checked pairs, interleaved (default 2)")
    p.add_argument("--profile", action="store_true", help="print a cProfile of the first checked step")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads for both (default: torch's; 1 is steadier on a shared machine)")
    args = p.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    steps = max(CHECK_STEPS + 2, args.steps)
    plain, checked, after = [], [], []
    plain_cpu, checked_cpu, after_cpu = [], [], []
    parts: list[dict] = []  # per measured checked step: seconds per part of the checks
    per_repeat: list[float] = []  # each repeat's own checked / plain (how far one run's reading moves)
    with tempfile.TemporaryDirectory(prefix="thundervis-numerics-") as folder:
        for r in range(args.repeats):
            (base, base_cpu), (chk, chk_cpu, chk_parts) = _paired_steps(steps, folder, r, args.profile and r == 0)
            per_repeat.append(statistics.median(chk[1:CHECK_STEPS]) / statistics.median(base[2:]))
            plain += base[2:]                      # steady state without checks
            checked += chk[1:CHECK_STEPS]          # the checked steps that do not compile
            parts += chk_parts[1:CHECK_STEPS]
            after += chk[CHECK_STEPS:]             # after the K checked calls
            plain_cpu += base_cpu[2:]
            checked_cpu += chk_cpu[1:CHECK_STEPS]
            after_cpu += chk_cpu[CHECK_STEPS:]
    p_med, c_med, a_med = statistics.median(plain), statistics.median(checked), statistics.median(after)
    spread = (max(plain) - min(plain)) / p_med if p_med else 0.0
    print(f"plain step (median of {len(plain)}):          {p_med * 1e3:9.1f} ms")
    print(f"checked step (median of {len(checked)}):         {c_med * 1e3:9.1f} ms")
    print(f"step after the checks (median of {len(after)}): {a_med * 1e3:9.1f} ms")
    r1, r2 = c_med / p_med, a_med / p_med
    print(f"checked / plain:        {r1:.2f}x  (target <= 3x: {'met' if r1 <= 3 else 'NOT met'}; "
          f"each repeat alone: {', '.join(f'{x:.2f}' for x in per_repeat)})")
    print(f"after checks / plain:   {r2:.2f}x  (target: within noise; plain steps spread {spread:.0%})")
    # The same measurement read as time added: how many plain steps the checks add to a checked step.
    print(f"added by the checks:    {r1 - 1:.2f} plain steps")
    _print_parts(parts, c_med - p_med, p_med)
    # Process CPU time: what the step itself computed, less sensitive to other processes on a
    # shared machine than the wall clock (with several torch threads it sums over them).
    pc, cc, ac = (statistics.median(x) for x in (plain_cpu, checked_cpu, after_cpu))
    print(f"CPU time: plain {pc * 1e3:.1f} ms, checked {cc * 1e3:.1f} ms, after {ac * 1e3:.1f} ms; "
          f"checked / plain {cc / pc:.2f}x, after / plain {ac / pc:.2f}x" if pc else "CPU time: not measured")
    return 0 if r1 <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
