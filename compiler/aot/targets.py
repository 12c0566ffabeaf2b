"""GPU targets: parsing ``sm_90``-style names, each architecture's per-SM limits, and theoretical
occupancy from a kernel's registers, shared memory and warps.

The limits are NVIDIA's published compute-capability tables (CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability"): resident warps and blocks per SM, 64 Ki 32-bit registers
per SM allocated per warp in units of 256, shared memory per SM (of which 1 KiB per block is
reserved by the system on sm_80 and later).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability."""
    arch: int
    max_warps: int
    max_blocks: int
    shared_bytes: int          # shared memory per SM usable by blocks
    registers: int = 65536
    reg_unit: int = 256        # registers are allocated per warp in units of this many
    block_reserved: int = 1024  # shared memory the system reserves per block


ARCHES = {
    75: ArchLimits(75, 32, 16, 64 * 1024, block_reserved=0),
    80: ArchLimits(80, 64, 32, 164 * 1024),
    86: ArchLimits(86, 48, 16, 100 * 1024),
    87: ArchLimits(87, 48, 16, 164 * 1024),
    89: ArchLimits(89, 48, 24, 100 * 1024),
    90: ArchLimits(90, 64, 32, 228 * 1024),
    100: ArchLimits(100, 64, 32, 228 * 1024),
    120: ArchLimits(120, 48, 32, 100 * 1024),
}

_NAME = re.compile(r"sm_?(\d{2,3})a?")


class TargetError(ValueError):
    """A target name that is not a known GPU architecture (the message is one sentence)."""


def parse_target(name: str) -> int:
    """Return the compute capability (``90``) of a target name (``sm_90``, ``sm90``, ``90``, ``sm_90a``)."""
    text = str(name).strip().lower()
    m = _NAME.fullmatch(text) or re.fullmatch(r"(\d{2,3})", text)
    if not m or int(m.group(1)) not in ARCHES:
        known = ", ".join(target_name(a) for a in ARCHES)
        raise TargetError(f"unknown GPU target {str(name)[:40]!r}; use one of {known}")
    return int(m.group(1))


def parse_targets(text) -> tuple[int, ...]:
    """Return the distinct capabilities named in a comma-separated list (or a sequence of names)."""
    names = text.split(",") if isinstance(text, str) else list(text)
    out: list[int] = []
    for n in names:
        if str(n).strip():
            a = parse_target(n)
            if a not in out:
                out.append(a)
    return tuple(out)


def target_name(arch: int) -> str:
    """Return ``sm_90`` for 90."""
    return f"sm_{arch}"


def local_targets() -> tuple[int, ...]:
    """Return the capability of each local CUDA GPU's architecture, known ones only (empty without
    CUDA); imports torch."""
    import torch
    if not torch.cuda.is_available():
        return ()
    out = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        a = major * 10 + minor
        if a in ARCHES and a not in out:
            out.append(a)
    return tuple(out)


def occupancy(arch: int, registers: int, shared_bytes: int, num_warps: int) -> Optional[dict]:
    """Return theoretical occupancy of a kernel on ``arch``: resident blocks per SM, active warps,
    the fraction of the SM's warps, and the limiting resource (``warps``, ``blocks``, ``registers``
    or ``shared``); None for an unknown arch or a kernel that cannot launch (returns 0 blocks)."""
    lim = ARCHES.get(arch)
    if lim is None or num_warps <= 0:
        return None
    per_warp = -(-max(registers, 1) * 32 // lim.reg_unit) * lim.reg_unit
    by = {"warps": lim.max_warps // num_warps, "blocks": lim.max_blocks,
          "registers": (lim.registers // per_warp) // num_warps}
    if shared_bytes > 0:
        by["shared"] = lim.shared_bytes // (shared_bytes + lim.block_reserved)
    limit = min(by, key=lambda k: (by[k], k != "warps"))
    blocks = by[limit]
    warps = blocks * num_warps
    return {"blocks_per_sm": blocks, "active_warps": warps, "max_warps": lim.max_warps,
            "occupancy": round(warps / lim.max_warps, 4), "limited_by": limit}
