"""Planning a fusion region's Triton kernel for a GPU target.

The run executes on its own device (on a CPU, the executor's CPU plan: few large programs for
Triton's interpreter). For a GPU target the same region is planned again with the generator's CUDA
sizes (:func:`..executors.triton_region.block_sizes`): a grid over the data with GPU-sized blocks;
dependent phases stay in one program only while every phase fits one block, else each phase is its
own launch (:mod:`..executors.triton_plan`). The plan is made from the region's IR in this process
(the kernel record's ``region`` trace), never from recorded text.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ..ir import KernelRecord
from ..executors.triton_plan import KernelSource, generate


@dataclass(frozen=True)
class TargetPlan:
    """A region planned for GPU targets: the kernel source, the key identical regions share
    (``build_key``: a hash of the compiled text and its launch parameters) and, per line of
    ``kernel.jit_source`` generated for a member op, that op's uid; ``members``: per member uid, its
    op and user source line (``{"sym", "file", "line", "code"}``)."""
    kernel: KernelSource
    build_key: str
    line_uids: dict
    members: dict


def region_members(record: KernelRecord) -> tuple[list, list]:
    """Return (member symbols, outputs) of a kernel record's region trace."""
    region = record.region
    if region is None:
        raise ValueError(f"{record.name} has no region trace")
    members = [b for b in region.symbols if b.sym != "del"]
    if len(members) == 1 and members[0].fusion:
        members = list(members[0].subsymbols)
    return members, list(region.outputs)


def plan_for_gpu(record: KernelRecord) -> TargetPlan:
    """Return the CUDA plan of a Triton kernel record; raises ``Unfusable`` (the reason) when the
    region cannot be one GPU kernel plan, ValueError when the record holds no region."""
    members, outputs = region_members(record)
    ks = generate(members, outputs, "cuda", title=record.name)
    launch = [[k.name, list(map(list, k.params)), k.num_warps] for k in ks.kernels]
    key = hashlib.sha256(json.dumps([ks.jit_source, launch]).encode()).hexdigest()[:24]
    uids = {line: members[i].uid for line, i in ks.jit_lines.items() if 0 <= i < len(members)}
    about = {}
    for b in members:
        src = b.source
        about[b.uid] = {"sym": b.sym, "file": getattr(src, "file", None), "line": getattr(src, "line", None),
                        "code": getattr(src, "code", None)}
    return TargetPlan(ks, key, uids, about)


def job(plan: TargetPlan, arch: int, ptx_options: str = "") -> dict:
    """Return the worker job (:func:`.worker.compile_job`) compiling ``plan`` for ``arch``."""
    ks = plan.kernel
    return {"source": ks.jit_source, "arch": arch, "ptx_options": ptx_options,
            "kernels": [{"name": k.name, "params": [list(p) for p in k.params], "num_warps": k.num_warps,
                         "grid": k.grid} for k in ks.kernels]}
