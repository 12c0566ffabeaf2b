"""Compile time: thundervis' whole pipeline including the recording vs ``torch.compile`` with the
default (Inductor) backend, on the GPT example model and the same inputs.

Compile time = wall time of the first training step (forward and backward compile plus one run)
minus nothing: both sides pay Dynamo's tracing the same way. Inductor's on-disk caches are turned
off so its number is a cold compile. Prints the ratio thundervis / inductor (target <= 0.5), and
the share of thundervis' compile time spent checking decompositions (target < 5%).
Usage: ``python benchmarks/compile_time.py [--executors torch|default|LIST]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gpt_model import build, train_step  # noqa: E402

TARGET = 0.5
CHECK_TARGET = 0.05


def first_step_seconds(compile_fn) -> float:
    """Return the seconds of the first compiled training step of a fresh model."""
    import torch._dynamo
    torch._dynamo.reset()
    model, batches, _ = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    run = compile_fn(model)
    t0 = time.perf_counter()
    train_step(run, model, opt, batches[0])
    return time.perf_counter() - t0


def main() -> int:
    """Measure and print; return 0 when the ratio meets the target, 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--executors", default="torch",
                   help="comma-separated executors (default: torch; 'default' for the compiler's defaults)")
    args = p.parse_args()
    executors = None if args.executors == "default" else args.executors.split(",")
    import torch._inductor.config as inductor_config
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    from thundervis.compiler.decomposition_check import STATS as check_stats
    from thundervis.recording import RecordingObserver

    inductor_config.fx_graph_cache = False
    if hasattr(inductor_config, "autotune_local_cache"):
        inductor_config.autotune_local_cache = False
    try:
        import torch._functorch.config as functorch_config
        functorch_config.enable_autograd_cache = False
    except Exception:
        pass
    _, _, where = build()
    with tempfile.TemporaryDirectory() as tmp:
        rec = RecordingObserver(os.path.join(tmp, "bench.tvrec"))
        rec.start_run(script=__file__, module=None, argv=sys.argv, cwd=os.getcwd())
        reset_graph_ids()
        check_stats.reset()
        ours = first_step_seconds(lambda m: torch.compile(m, backend=ThundervisCompiler(executors=executors, observer=rec),
                                                          dynamic=False))
        checked, check_s, refused = check_stats.calls, check_stats.seconds, check_stats.refused
        rec.finish_run("ok", 0)
        rec.close()
    inductor = first_step_seconds(lambda m: torch.compile(m, dynamic=False))
    ratio = ours / inductor
    print(f"model: {where} · executors: {args.executors}")
    print(f"thundervis (recording on):  {ours:8.2f} s  first training step")
    print(f"torch.compile (inductor):   {inductor:8.2f} s  first training step, caches off")
    print(f"ratio thundervis/inductor:  {ratio:8.3f}  (target <= {TARGET})  {'OK' if ratio <= TARGET else 'MISSED'}")
    share = check_s / ours
    print(f"decomposition check:        {check_s * 1e3:8.2f} ms  {checked} ops checked, {refused} refused")
    print(f"check share of compile:     {100 * share:8.3f} %  (target < {100 * CHECK_TARGET:.0f} %)  "
          f"{'OK' if share < CHECK_TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET and share < CHECK_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
