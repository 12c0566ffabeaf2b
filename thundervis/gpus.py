"""The GPUs a recording can be modelled on: vendor datasheet figures and the target -> GPU map.

Every figure is the vendor's, for one GPU, dense (no 2:4 structured sparsity: NVIDIA's datasheets
print tensor-core peaks "with sparsity", which are twice the dense peaks used here). The sources
are cited per GPU in docs/targets.md, section "GPU table"; a test holds the figures to that page.
Torch-free and Triton-free: the reader path imports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

GB = 1e9  # bytes per second in one GB/s (datasheets use decimal units)
TFLOPS = 1e12


@dataclass(frozen=True)
class GPU:
    """One GPU's datasheet figures: HBM bandwidth (bytes/s), dense peak FLOP/s per precision (None:
    the GPU has no such unit), SMs, 32-bit registers and shared memory (bytes) per SM, and the
    compute capability it is (``sm_90``)."""

    key: str  # short name used on the command line: a100, h100, h200, b200
    name: str
    arch: str
    hbm_bytes_per_s: float
    fp32_flops: float  # CUDA cores (non-tensor)
    bf16_flops: float  # tensor cores, dense
    fp8_flops: Optional[float]  # tensor cores, dense; None before Hopper
    sms: int
    registers_per_sm: int
    shared_bytes_per_sm: int

    def peak_flops(self, precision: str) -> Optional[float]:
        """Return the dense peak FLOP/s for ``precision`` (``fp32``, ``bf16``, ``fp8``), or None when
        the table has no figure for it (``fp64``, FP8 on A100, an unknown name)."""
        return {"fp32": self.fp32_flops, "bf16": self.bf16_flops, "fp8": self.fp8_flops}.get(precision)

    def as_json(self) -> dict:
        """Return the figures as plain JSON (bandwidth in GB/s, peaks in TFLOP/s, shared memory in KiB)."""
        tf = lambda v: None if v is None else round(v / TFLOPS, 3)  # noqa: E731
        return {"key": self.key, "name": self.name, "arch": self.arch,
                "hbm_gb_per_s": round(self.hbm_bytes_per_s / 1e9, 3), "fp32_tflops": tf(self.fp32_flops),
                "bf16_tflops": tf(self.bf16_flops), "fp8_tflops": tf(self.fp8_flops), "sms": self.sms,
                "registers_per_sm": self.registers_per_sm, "shared_kib_per_sm": self.shared_bytes_per_sm // 1024}


KIB = 1024
REGS_64K = 65536  # 64K 32-bit registers per SM on compute capability 8.0, 9.0 and 10.0

GPUS: dict[str, GPU] = {g.key: g for g in (
    GPU("a100", "A100 80GB SXM", "sm_80", 2039 * GB, 19.5 * TFLOPS, 312 * TFLOPS, None,
        108, REGS_64K, 164 * KIB),
    GPU("h100", "H100 SXM", "sm_90", 3350 * GB, 67 * TFLOPS, 989.5 * TFLOPS, 1979 * TFLOPS,
        132, REGS_64K, 228 * KIB),
    GPU("h200", "H200 SXM", "sm_90", 4800 * GB, 67 * TFLOPS, 989.5 * TFLOPS, 1979 * TFLOPS,
        132, REGS_64K, 228 * KIB),
    GPU("b200", "B200 (HGX)", "sm_100", 7700 * GB, 75 * TFLOPS, 2250 * TFLOPS, 4500 * TFLOPS,
        148, REGS_64K, 228 * KIB),
)}

# The GPU a target is modelled on when the user names only the target; H200 is sm_90 too and is
# chosen by name (``h200``).
TARGET_GPU = {"sm_80": "a100", "sm_90": "h100", "sm_100": "b200"}
DEFAULT_TARGET = "sm_90"


class UnknownGPU(ValueError):
    """A target or GPU name the table does not hold; the message names the choices."""


def gpu_for(spec: str) -> GPU:
    """Return the GPU for ``spec``: a target (``sm_90``, also ``90``), a GPU key (``h200``) or a
    target with a GPU (``sm_90:h200``). Raise :class:`UnknownGPU` naming the choices."""
    s = str(spec).strip().lower()
    target, _, key = s.partition(":")
    if target.isdigit():
        target = f"sm_{target}"
    if key:
        g = GPUS.get(key)
        if g is None or g.arch != target:
            raise UnknownGPU(f"no GPU {spec!r} in the table (choices: {choices()})")
        return g
    if target in GPUS:
        return GPUS[target]
    if target in TARGET_GPU:
        return GPUS[TARGET_GPU[target]]
    raise UnknownGPU(f"no GPU for {spec!r} in the table (choices: {choices()})")


def choices() -> str:
    """Return the accepted spellings, for messages: targets then GPU keys."""
    return ", ".join(list(TARGET_GPU) + list(GPUS))
