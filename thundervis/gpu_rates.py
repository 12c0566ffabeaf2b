"""What each GPU of :mod:`thundervis.gpus` achieves, not what its datasheet promises: the rates the
modelled step time uses (``Cost.modelled_us`` in ``compiler/roofline_cost.py``).

Every figure was measured by someone and published; each carries its source, and a figure nobody
published for that GPU says so (``SOURCES``) and falls back to what is written next to it (the
datasheet, or another GPU's measured fraction). docs/targets.md, section "Achievable rates", cites
them and a test holds this table to that page. ``scripts/gpu_rates_check.py`` measures them on a
GPU. Torch-free: the reader path imports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from thundervis.gpus import GB, GPUS, TFLOPS

# The cuBLAS tile the wave quantization is computed with: the largest (most efficient) tile of the
# "Typical Tile Dimensions In cuBLAS" section of NVIDIA's Matrix Multiplication Background guide.
GEMM_TILE = (256, 128)
# Launch overhead of a null kernel "about 3 microseconds with recent hardware and software" (NVIDIA
# developer forums, thread "Too much time for kernel launch latency"): paid once per kernel and
# torch op of the step, whatever the GPU.
LAUNCH_US = 3.0


@dataclass(frozen=True)
class Rates:
    """One GPU's achievable rates: dense GEMM FLOP/s per tensor-core precision (cuBLAS, best shape),
    scaled-dot-product attention FLOP/s forward and backward (the FlashAttention version torch's SDPA
    runs there), HBM copy bytes/s, CUDA-core FP32 FLOP/s (fusions), and the per-kernel launch cost
    (µs). ``sms`` and ``tile`` give the wave quantization of a GEMM."""

    key: str
    gemm_bf16: float
    gemm_fp8: Optional[float]
    attention_fwd: float
    attention_bwd: float
    hbm_bytes_per_s: float
    fp32_flops: float
    sms: int
    launch_us: float = LAUNCH_US
    tile: tuple = GEMM_TILE

    def gemm_flops(self, precision: str) -> Optional[float]:
        """Return the achievable GEMM FLOP/s for ``precision`` (``bf16``, ``fp8``, ``fp32``: the CUDA
        cores), None when there is none (``fp64``)."""
        return {"bf16": self.gemm_bf16, "fp8": self.gemm_fp8, "fp32": self.fp32_flops}.get(precision)

    def as_json(self) -> dict:
        """Return the rates as plain JSON (TFLOP/s, GB/s, µs) with each figure's source."""
        tf = lambda v: None if v is None else round(v / TFLOPS, 1)  # noqa: E731
        return {"gpu": self.key, "gemm_bf16_tflops": tf(self.gemm_bf16), "gemm_fp8_tflops": tf(self.gemm_fp8),
                "attention_fwd_tflops": tf(self.attention_fwd), "attention_bwd_tflops": tf(self.attention_bwd),
                "hbm_gb_per_s": round(self.hbm_bytes_per_s / GB), "fp32_tflops": tf(self.fp32_flops),
                "launch_us": self.launch_us, "gemm_tile": list(self.tile), "sms": self.sms,
                "sources": dict(SOURCES[self.key])}


# FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608), H100 80GB SXM5, head dim 128,
# sequence 4k: FlashAttention-2 forward 368 TFLOP/s (non-causal), backward 310 TFLOP/s.
_FA2_H100_FWD, _FA2_H100_BWD = 368 * TFLOPS, 310 * TFLOPS

RATES: dict[str, Rates] = {r.key: r for r in (
    Rates("a100", 271.2 * TFLOPS, None, 0.73 * 312 * TFLOPS, 0.50 * 312 * TFLOPS, 1536 * GB,
          GPUS["a100"].fp32_flops, GPUS["a100"].sms),
    Rates("h100", 794.5 * TFLOPS, 1402.6 * TFLOPS, _FA2_H100_FWD, _FA2_H100_BWD, GPUS["h100"].hbm_bytes_per_s,
          GPUS["h100"].fp32_flops, GPUS["h100"].sms),
    Rates("h200", 794.5 * TFLOPS, 1453.4 * TFLOPS, _FA2_H100_FWD, _FA2_H100_BWD, GPUS["h200"].hbm_bytes_per_s,
          GPUS["h200"].fp32_flops, GPUS["h200"].sms),
    Rates("b200", 1745.0 * TFLOPS, 3432.5 * TFLOPS, _FA2_H100_FWD / GPUS["h100"].bf16_flops * GPUS["b200"].bf16_flops,
          _FA2_H100_BWD / GPUS["h100"].bf16_flops * GPUS["b200"].bf16_flops, GPUS["b200"].hbm_bytes_per_s,
          GPUS["b200"].fp32_flops, GPUS["b200"].sms),
)}

_MAMF = "MAMF table (stas00/ml-engineering, compute/accelerator/README.md, mean of 100 matmuls at the best shape)"
_NO_COPY = "none found for this part: the datasheet bandwidth"
_FP32 = "none found: the datasheet FP32 peak"
SOURCES: dict[str, dict[str, str]] = {
    "a100": {"gemm_bf16": f"{_MAMF}: A100 SXM 271.2", "gemm_fp8": "no FP8 units",
             "attention": "FlashAttention-2 paper (Dao 2023, arXiv 2307.08691): 50-73% of the A100's peak; "
                          "forward held to 73%, backward to 50%",
             "hbm": "memcopy on an A100 SXM4 80GB: 1536 GB/s (AnjaliSandip/FastIceFlo, "
                    "output/EffectiveMemoryThroughput.md)", "fp32": _FP32},
    "h100": {"gemm_bf16": f"{_MAMF}: H100 SXM 794.5", "gemm_fp8": f"{_MAMF}: H100 SXM 1402.6",
             "attention": "FlashAttention-3 paper (arXiv 2407.08608), H100 SXM5, head dim 128, seq 4k: "
                          "FlashAttention-2 forward 368, backward 310", "hbm": _NO_COPY, "fp32": _FP32},
    "h200": {"gemm_bf16": f"{_MAMF}: H100 SXM 794.5 (\"H200 is the same\")", "gemm_fp8": f"{_MAMF}: H200 SXM 1453.4",
             "attention": "none published for H200: H100's FlashAttention-2 figures (same GH100 chip and clocks)",
             "hbm": _NO_COPY, "fp32": _FP32},
    "b200": {"gemm_bf16": f"{_MAMF}: B200 SXM 1745.0", "gemm_fp8": f"{_MAMF}: B200 SXM 3432.5",
             "attention": "none published for B200: H100's FlashAttention-2 fractions of peak (37%, 31%) "
                          "applied to B200's peak", "hbm": _NO_COPY, "fp32": _FP32},
}


def rates_for(key: str) -> Rates:
    """Return the achievable rates of GPU ``key`` (a :data:`thundervis.gpus.GPUS` key)."""
    return RATES[key]
