"""Training step time: compiled with thundervis' torch executor vs eager, on the GPT example model.

Prints the median step time of each and the ratio compiled / eager (target <= 1.05), measured in
this one run. Usage: ``python benchmarks/step_time.py [--steps N] [--warmup N] [--rounds N]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gpt_model import build, train_step  # noqa: E402

TARGET = 1.05


def time_steps(run, model, batches, warmup: int, steps: int) -> float:
    """Return the median seconds of ``steps`` training steps after ``warmup`` steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i in range(warmup):
        train_step(run, model, opt, batches[i % len(batches)])
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        train_step(run, model, opt, batches[i % len(batches)])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    """Measure and print; return 0 when the ratio meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=6, help="interleaved eager/compiled rounds")
    args = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    from thundervis.compiler import ThundervisCompiler

    model, batches, where = build()
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=["torch"]), dynamic=False)
    # Interleave several rounds so a slow phase of the machine (other processes sharing the cores)
    # does not favour one side; each side keeps its best round's median.
    eager_t, ours_t = [], []
    for _ in range(max(1, args.rounds)):
        eager_t.append(time_steps(model, model, batches, args.warmup, args.steps))
        ours_t.append(time_steps(compiled, model, batches, args.warmup, args.steps))
    eager, ours = min(eager_t), min(ours_t)
    ratio = ours / eager
    print(f"model: {where}")
    print(f"eager step:                 {eager * 1e3:8.2f} ms (best of {args.rounds} rounds' medians of {args.steps})")
    print(f"thundervis (torch) step:    {ours * 1e3:8.2f} ms")
    print(f"ratio compiled/eager:       {ratio:8.3f}  (target <= {TARGET})  {'OK' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
