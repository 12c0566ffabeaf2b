"""A training loop that prints each step's wall time, for ``benchmarks/step_stalls.py``.

``python benchmarks/_stall_driver.py MODEL [--eager] [--seconds S] [--min-steps N]`` trains MODEL
(``gpt``: the repo's example GPT; ``gpt2``, ``llama``: tiny random-init Hugging Face models, no
download) with ``torch.compile(model)`` (``thundervis run`` routes it to thundervis) or eagerly,
until ``S`` seconds have passed and at least ``N`` steps ran, printing ``step I MS`` per step
(``step I MS START`` with ``$THUNDERVIS_STALL_TRACE=1``: START is the step's ``time.time()``, the
clock of the recording's events, so that the benchmark can say what happened during a slow step).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def build(name: str):
    """Return (model, loss_fn()) of ``name``, seeded."""
    if name == "gpt":
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
        import train_gpt
        model, batches = train_gpt.build()
        x, y = batches[0]
        return model, lambda m: m(x, y)[1]
    sys.path.insert(0, HERE)
    from _memory_models import build as hf_build
    model, batch = hf_build(name, hidden=64, layers=2, batch=2, seq=64)
    return model, lambda m: m(**batch).loss


def main() -> int:
    """Train and print step times (see the module doc)."""
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=("gpt", "gpt2", "llama"))
    p.add_argument("--eager", action="store_true")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--min-steps", type=int, default=30)
    args = p.parse_args()
    torch.manual_seed(0)
    model, loss_of = build(args.model)
    run = model if args.eager else torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    trace = os.environ.get("THUNDERVIS_STALL_TRACE") == "1"
    start, step = time.perf_counter(), 0
    while step < args.min_steps or time.perf_counter() - start < args.seconds:
        wall, t0 = time.time(), time.perf_counter()
        loss = loss_of(run)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = (time.perf_counter() - t0) * 1e3
        print(f"step {step} {ms:.3f} {wall:.3f}" if trace else f"step {step} {ms:.3f}", flush=True)
        step += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
