"""Training step time: compiled with thundervis vs eager, on the GPT example model.

Measures eager and, in the same run, each executor choice of ``--executors`` (default ``torch``):
``torch`` (every op through the torch executor; target <= 1.05x eager), ``default`` (the default
executors: without CUDA, Triton fusions run through the fast CPU path; target <= 1.2x eager) or a
comma-separated executor list such as ``triton,torch`` (Triton's interpreter on CPU; no target).
Several choices are separated by ``;`` or given as ``--executors torch --executors default``.
Prints the median step time of each and the ratio compiled / eager (wall clock; the ratio of
process CPU time is printed beside it: on a machine other processes share it is the steadier one).
``--remat off,auto`` compiles each choice with each rematerialization policy (default: auto only)
and prints auto's step time over off's (target <= 1.05).
Usage: ``python benchmarks/step_time.py [--executors CHOICE] [--remat off,auto] [--steps N] [--warmup N] [--rounds N]``.
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

TARGETS = {"torch": 1.05, "default": 1.2}
REMAT_TARGET = 1.05


def time_steps(run, model, batches, warmup: int, steps: int) -> tuple[float, float]:
    """Return the median (wall, process CPU) seconds of ``steps`` training steps after ``warmup``."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i in range(warmup):
        train_step(run, model, opt, batches[i % len(batches)])
    times, cpu = [], []
    for i in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        train_step(run, model, opt, batches[i % len(batches)])
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu)


def main() -> int:
    """Measure and print; return 0 when the ratio meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=6, help="interleaved eager/compiled rounds")
    p.add_argument("--executors", action="append", metavar="CHOICE",
                   help="torch (default), default (the default executors) or a list such as triton,torch")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads (default: torch's own choice); 1 on a machine other processes share")
    p.add_argument("--remat", default="auto", help="remat policies to compile each choice with: auto, off or off,auto")
    args = p.parse_args()
    base_choices = [c.strip() for text in (args.executors or ["torch"]) for c in text.split(";") if c.strip()]
    remats = [r.strip() for r in args.remat.split(",") if r.strip()]
    choices = [c if remats == ["auto"] else f"{c} remat={r}" for c in base_choices for r in remats]
    torch.set_num_threads(args.threads if args.threads > 0 else max(1, torch.get_num_threads()))
    from thundervis.compiler import ThundervisCompiler

    model, batches, where = build()
    compiled = {}
    for choice in choices:
        name, _, remat = choice.partition(" remat=")
        executors = None if name == "default" else [n.strip() for n in name.split(",") if n.strip()]
        compiled[choice] = torch.compile(model, backend=ThundervisCompiler(executors=executors, remat=remat or "auto"),
                                         dynamic=False)
    # Interleave several rounds so a slow phase of the machine (other processes sharing the cores)
    # does not favour one side; each side keeps its best round's median.
    eager_t, ours_t = [], {c: [] for c in choices}
    for _ in range(max(1, args.rounds)):
        eager_t.append(time_steps(model, model, batches, args.warmup, args.steps))
        for c in choices:
            ours_t[c].append(time_steps(compiled[c], model, batches, args.warmup, args.steps))
    eager = min(t for t, _ in eager_t)
    eager_cpu = min(c for _, c in eager_t)
    print(f"model: {where}  ·  torch threads: {torch.get_num_threads()}")
    print(f"eager step:                 {eager * 1e3:8.2f} ms (best of {args.rounds} rounds' medians of {args.steps}; "
          f"{eager_cpu * 1e3:.2f} ms CPU)")
    ok = True
    for c in choices:
        ours = min(t for t, _ in ours_t[c])
        ours_cpu = min(x for _, x in ours_t[c])
        ratio = ours / eager
        target = TARGETS.get(c.partition(" remat=")[0])
        verdict = "" if target is None else f"  (target <= {target})  {'OK' if ratio <= target else 'MISSED'}"
        ok = ok and (target is None or ratio <= target)
        print(f"thundervis ({c}) step:{' ' * max(1, 8 - len(c))}{ours * 1e3:8.2f} ms   ratio compiled/eager: "
              f"{ratio:6.3f}{verdict}   (CPU time: {ours_cpu * 1e3:.2f} ms, ratio {ours_cpu / eager_cpu:.3f})")
    for c in base_choices:
        if {f"{c} remat=off", f"{c} remat=auto"} <= set(ours_t):
            auto, off = ours_t[f"{c} remat=auto"], ours_t[f"{c} remat=off"]
            r = min(t for t, _ in auto) / min(t for t, _ in off)
            r_cpu = min(x for _, x in auto) / min(x for _, x in off)
            ok = ok and r <= REMAT_TARGET
            print(f"{c}: remat auto / off step time {r:6.3f}  (target <= {REMAT_TARGET})  "
                  f"{'OK' if r <= REMAT_TARGET else 'MISSED'}   (CPU time ratio {r_cpu:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
