"""Recording overhead: compiling the GPT example model with the recording observer vs without.

Compile time = the first training step of a fresh model (forward and backward compile). Each side is
measured ``--repeat`` times, alternating, and the medians are compared: ratio with / without
(target <= 1.10). Also prints the recording's size and what the recording does once the run ends
(the ``symbols`` rows and lookup indexes, the WAL checkpoint), which the compile does not wait for.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gpt_model import build, train_step  # noqa: E402

TARGET = 1.10


def compile_seconds(observer, executors) -> float:
    """Return the seconds of the first training step of a fresh model compiled with ``observer``."""
    import torch._dynamo
    from thundervis.compiler import ThundervisCompiler
    torch._dynamo.reset()
    model, batches, _ = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run = torch.compile(model, backend=ThundervisCompiler(executors=executors, observer=observer), dynamic=False)
    t0 = time.perf_counter()
    train_step(run, model, opt, batches[0])
    return time.perf_counter() - t0


def main() -> int:
    """Measure and print; return 0 when the ratio meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--executors", default="torch",
                   help="comma-separated executors (default: torch; 'default' for the compiler's defaults)")
    args = p.parse_args()
    executors = None if args.executors == "default" else args.executors.split(",")
    from thundervis.compiler import CompileObserver
    from thundervis.recording import RecordingObserver

    _, _, where = build()
    compile_seconds(CompileObserver(), executors)  # warm imports and decomposition tables
    with_rec, without, finish, size = [], [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            path = os.path.join(tmp, f"r{i}.tvrec")
            rec = RecordingObserver(path)
            rec.start_run(script=__file__, module=None, argv=sys.argv, cwd=os.getcwd())
            # Alternate which side goes first, so running second in a pair favours neither.
            order = [("without", CompileObserver()), ("with", rec)]
            for side, observer in (order if i % 2 == 0 else order[::-1]):
                gc.collect()
                (with_rec if side == "with" else without).append(compile_seconds(observer, executors))
            t0 = time.perf_counter()
            rec.finish_run("ok", 0)
            rec.close()
            finish.append(time.perf_counter() - t0)
            size = os.path.getsize(path)
    a, b = statistics.median(with_rec), statistics.median(without)
    ratio = a / b
    print(f"model: {where} · executors: {args.executors}")
    print(f"compile without recording:  {b:8.3f} s  (median of {args.repeat}: "
          f"{' '.join(f'{x:.2f}' for x in without)})")
    print(f"compile with recording:     {a:8.3f} s  ({' '.join(f'{x:.2f}' for x in with_rec)})")
    print(f"recording size:             {size / 2**20:8.2f} MiB")
    print(f"end of run (symbol rows, indexes, WAL checkpoint; not part of the compile): "
          f"{statistics.median(finish) * 1e3:.1f} ms")
    print(f"ratio with/without:         {ratio:8.3f}  (target <= {TARGET})  {'OK' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
