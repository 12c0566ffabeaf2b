"""Host overhead of the compiled callable: a tiny model made of many small ops, where per-op Python
cost dominates, timed compiled (thundervis, torch executor) and eager in this one run.

Prints the median time per call of each and the ratio compiled / eager, for a forward+backward
training step and for a no-grad forward. It also times torch.compile with ``backend="aot_eager"``
(Dynamo + AOTAutograd running the ATen graph as is): compiled / aot_eager is the part of the overhead
that is ours rather than torch.compile's guards and wrappers. Informative only (no pass/fail): the
ratios depend on the machine. Usage: ``python benchmarks/host_overhead.py [--iters N] [--repeats N] [--depth N]``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn as nn

from thundervis.compiler import CompileObserver, ThundervisCompiler


class ChainCounter(CompileObserver):
    """Counts the chains thundervis compiled (to show the timed calls really ran through it)."""

    def __init__(self):
        self.chains = []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        if name == "codegen":
            self.chains.append(chain)


class ManySmallOps(nn.Module):
    """``depth`` residual blocks of linear + tanh + scale on a few numbers: ~6 ATen ops per block."""

    def __init__(self, width: int = 8, depth: int = 16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + 0.5 * torch.tanh(layer(x))
        return x.sum()


def call_time(fn: Callable[[], object], iters: int) -> float:
    """Return the mean seconds per call of ``fn`` over ``iters`` calls."""
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def workloads(model: nn.Module, run: Callable, x: torch.Tensor) -> dict:
    """Return {name: zero-argument callable}: a training step and a no-grad forward through ``run``."""
    def train_step():
        run(x).backward()
        model.zero_grad(set_to_none=True)

    def forward():
        with torch.no_grad():
            run(x)
    return {"train step": train_step, "forward (no grad)": forward}


def measure(variants: dict, iters: int, repeats: int) -> dict:
    """Return {(variant, workload): median seconds per call}. Variants are timed in turn within each
    repeat, so a machine whose load drifts affects them alike."""
    for fns in variants.values():  # warm up: compiles every graph (training and inference)
        for fn in fns.values():
            for _ in range(3):
                fn()
    samples: dict = {}
    for _ in range(repeats):
        for variant, fns in variants.items():
            for what, fn in fns.items():
                samples.setdefault((variant, what), []).append(call_time(fn, iters))
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> int:
    """Measure and print the times and ratios; return 0 (1 when thundervis compiled nothing)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=200, help="calls per timing sample (default 200)")
    p.add_argument("--repeats", type=int, default=5, help="timing samples, the median is kept (default 5)")
    p.add_argument("--depth", type=int, default=16, help="residual blocks in the model (default 16)")
    p.add_argument("--width", type=int, default=8, help="features per layer (default 8)")
    args = p.parse_args()
    if min(args.iters, args.repeats, args.depth, args.width) < 1:
        p.error("--iters, --repeats, --depth and --width must be at least 1")

    torch.manual_seed(0)
    model = ManySmallOps(args.width, args.depth)
    x = torch.randn(4, args.width)
    counter = ChainCounter()
    variants = {
        "eager": workloads(model, model, x),
        "aot_eager": workloads(model, torch.compile(model, backend="aot_eager"), x),
        "thundervis": workloads(model, torch.compile(model, backend=ThundervisCompiler(executors=["torch"],
                                                                                     observer=counter)), x),
    }
    t = measure(variants, args.iters, args.repeats)
    if not counter.chains:
        print("thundervis compiled nothing: the timings below are not of thundervis")
        return 1

    print(f"model: {args.depth} blocks of Linear({args.width}, {args.width}) + tanh + residual, batch 4;"
          f" thundervis chains: {', '.join(sorted(counter.chains))}")
    for what in variants["eager"]:
        e, a, c = (t[(v, what)] for v in ("eager", "aot_eager", "thundervis"))
        print(f"{what:18s} eager {e * 1e6:8.1f} us  aot_eager {a * 1e6:8.1f} us  thundervis {c * 1e6:8.1f} us"
              f"  ratio compiled/eager {c / e:.2f}  compiled/aot_eager {c / a:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
