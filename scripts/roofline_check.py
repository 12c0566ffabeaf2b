"""Compare the roofline model with the times measured on this GPU (run by scripts/gpu_check.sh):

    python scripts/roofline_check.py REC [--gpu h200]

For a recording profiled on CUDA (``thundervis run --profile``), prints per kernel and torch
matmul/attention its roofline µs on this GPU (from the table, picked by the device name, else by
its compute capability), the measured median and % of roofline, then the modelled step against the
measured step. Exit 1 when a measured time is below 90% of its roofline (the model counts more
bytes or FLOPs than the kernel can have moved), 2 when nothing was measured on a GPU."""
from __future__ import annotations

import argparse
import sys


def local_gpu() -> str:
    """Return the table key of this machine's GPU (by name, else by compute capability)."""
    import torch
    name = torch.cuda.get_device_name().lower()
    for key in ("h200", "h100", "a100", "b200"):
        if key in name:
            return key
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def main() -> int:
    """Print the comparison; return the exit code."""
    from thundervis.present.roofline import roofline_rows, step_models
    from thundervis.recording import open_recording
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording")
    p.add_argument("--gpu", default=None, help="table GPU to model on (default: this machine's)")
    args = p.parse_args()
    gpu = args.gpu or local_gpu()
    with open_recording(args.recording) as rec:
        rows = [r for r in roofline_rows(rec, gpu) if r.pct_of_roofline is not None]
        step = step_models(rec, [gpu])[0]
        measured = {(c.graph, c.chain): c.median_us for c in rec.timings().chains if c.clock == "device"}
    if not rows:
        print("roofline_check: nothing in this recording was timed on a GPU (thundervis run --profile on CUDA).")
        return 2
    print(f"{'kernel':<28} {'kind':<9} {'roofline µs':>12} {'measured µs':>12} {'% roofline':>11}  bound")
    bad = []
    for r in rows:
        print(f"{r.name[:28]:<28} {r.kind:<9} {r.roofline_us:>12.3f} {r.measured_us:>12.2f} "
              f"{r.pct_of_roofline:>10.1f}%  {r.bound}")
        if r.measured_us < 0.9 * r.roofline_us:
            bad.append(r)
    total = sum(us for (g, c), us in measured.items() if any(x[0] == g and x[1] == c for x in step.chains))
    print(f"\nmodelled step on {step.target} {step.gpu}: {step.total_us:.1f} µs · measured step (median per chain, "
          f"summed): {total:.1f} µs · {step.total_us / total * 100 if total else 0:.1f}% of roofline")
    for r in bad:
        print(f"roofline_check: {r.name} measured {r.measured_us:.2f} µs, below its roofline {r.roofline_us:.2f} µs: "
              "the model overcounts its bytes or FLOPs", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
