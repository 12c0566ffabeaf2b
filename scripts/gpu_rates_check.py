"""Measure this GPU's achievable rates and print them against thundervis/gpu_rates.py's table
(run by scripts/gpu_check.sh):

    python scripts/gpu_rates_check.py [--gpu h100] [--quick]

Times, with CUDA events (best of a few shapes, mean over the timed iterations after a warm-up): a
bf16 GEMM (``torch.matmul``: cuBLAS), an FP8 GEMM where torch has ``_scaled_mm``, scaled-dot-product
attention forward and backward on the flash backend (head dimension 128, sequence 4096, batch 4,
16 heads: the FlashAttention papers' setting; non-causal against the table, causal printed beside),
and a device-to-device copy of 1 GiB. Each line gives measured / table; ``!`` marks a figure more
than 15% away from the table. Without CUDA it says so in one sentence and exits 0.
"""
from __future__ import annotations

import argparse
import os
import sys


def _time_ms(fn, warmup: int, iters: int) -> float:
    """Return the mean milliseconds of ``fn()`` over ``iters`` calls after ``warmup`` calls."""
    import torch
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def gemm_tflops(quick: bool) -> float:
    """Return the best bf16 GEMM TFLOP/s over a few large shapes (MAMF best shapes, Llama's)."""
    import torch
    shapes = [(2048, 2048, 13312), (4096, 14336, 4096), (8192, 8192, 8192)][: 2 if quick else 3]
    best = 0.0
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms = _time_ms(lambda: torch.matmul(a, b), 10, 30 if quick else 100)
        best = max(best, 2 * m * n * k / (ms * 1e-3) / 1e12)
    return best


def fp8_tflops(quick: bool):
    """Return the FP8 (e4m3) GEMM TFLOP/s through ``torch._scaled_mm``, or a reason it was not measured."""
    import torch
    if not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability() < (8, 9):
        return "no FP8 GEMM in this torch or on this GPU"
    m = n = k = 8192
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.tensor(1.0, device="cuda")
    try:
        ms = _time_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                      10, 30 if quick else 100)
    except (RuntimeError, TypeError) as e:
        return f"torch._scaled_mm failed: {str(e).splitlines()[0][:80]}"
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def sdpa_tflops(causal: bool, quick: bool) -> tuple[float, float]:
    """Return (forward, backward) TFLOP/s of flash SDPA, counted as the FlashAttention papers do:
    ``4·B·H·L·S·d`` forward (half when causal), 2.5x that backward."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = 4, 16, 4096, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    flops = 4 * b * h * s * s * d // (2 if causal else 1)
    iters = 10 if quick else 30
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = _time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), 5, iters)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        grad = torch.randn_like(out)
        both = _time_ms(lambda: torch.autograd.grad(
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), grad), 5, iters)
    return flops / (fwd * 1e-3) / 1e12, 2.5 * flops / (max(both - fwd, 1e-6) * 1e-3) / 1e12


def copy_gb_per_s(quick: bool) -> float:
    """Return the device-to-device copy rate (bytes read plus written per second, GB/s) of 1 GiB."""
    import torch
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _time_ms(lambda: dst.copy_(src), 5, 20 if quick else 50)
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def main() -> int:
    """Measure and print; always exit 0 on a machine without CUDA."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default=None, help="table GPU to compare with (default: this machine's)")
    p.add_argument("--quick", action="store_true", help="fewer shapes and iterations")
    args = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("gpu_rates_check: this machine has no CUDA device; nothing to measure.")
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from roofline_check import local_gpu
    from thundervis.gpu_rates import RATES
    from thundervis.gpus import UnknownGPU, gpu_for
    try:
        key = gpu_for(args.gpu or local_gpu()).key
    except UnknownGPU as e:
        print(f"gpu_rates_check: {e}; measuring without a table to compare with.")
        key = None
    r = RATES.get(key)
    print(f"gpu_rates_check: {torch.cuda.get_device_name()} (table: {key or 'none'}) | torch {torch.__version__}")
    fwd, bwd = sdpa_tflops(False, args.quick)
    cfwd, cbwd = sdpa_tflops(True, args.quick)
    rows = [("GEMM bf16 (TFLOP/s)", gemm_tflops(args.quick), r and r.gemm_bf16 / 1e12),
            ("GEMM fp8 (TFLOP/s)", fp8_tflops(args.quick), r and r.gemm_fp8 and r.gemm_fp8 / 1e12),
            ("SDPA forward (TFLOP/s)", fwd, r and r.attention_fwd / 1e12),
            ("SDPA backward (TFLOP/s)", bwd, r and r.attention_bwd / 1e12),
            ("SDPA causal forward", cfwd, r and r.attention_fwd / 1e12),
            ("SDPA causal backward", cbwd, r and r.attention_bwd / 1e12),
            ("HBM copy (GB/s)", copy_gb_per_s(args.quick), r and r.hbm_bytes_per_s / 1e9)]
    for name, got, table in rows:
        if isinstance(got, str):
            print(f"  {name:26} not measured: {got}")
            continue
        ratio = got / table if table else None
        mark = " !" if ratio is not None and abs(ratio - 1) > 0.15 else ""
        print(f"  {name:26} measured {got:9.1f}   table {table if table else '—':>9}"
              + (f"   measured/table {ratio:5.2f}{mark}" if ratio else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
