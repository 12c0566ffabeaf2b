"""A synthetic group (the folder ``thundervis run --nproc-per-node N`` writes), without torchrun:
one synthetic recording per rank written through the real writer (``_synthetic_recording``), each
with the ``distributed`` event a torchrun worker records, optionally profiled (kernel timings that
differ per rank), then packed by the real ``pack_group`` (``.tvrank`` files for ranks whose traces
equal an earlier rank's, texts once in ``traces.tvstore``). For the TUI tests and benchmarks.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

from _synthetic_recording import kernel_name, write_recording

# Each variant's traces: a different number of ops in the forward chain (its first pass gains lines).
VARIANT_SYMBOLS = (40, 44, 48, 52)


def _timings(rank: int, n_kernels: int = 3) -> dict:
    """A profiler summary of the forward chain on ``rank``: kernel k takes longer on higher ranks,
    more so for higher k (so the skew table has a clear order)."""
    symbols = []
    for k in range(n_kernels):
        median = 100.0 * (k + 1) * (1.0 + 0.25 * k * rank)
        symbols.append({"uid": f"f{1000 + k}", "name": kernel_name(0, "forward", k), "calls": 5,
                        "median_us": median, "min_us": median * 0.9, "max_us": median * 1.2,
                        "total_us": median * 5, "share": 0.2, "bytes_read": 4096, "bytes_written": 2048,
                        "gbps": 1.5, "executor": "triton", "kind": "kernel", "index": k})
    step = sum(s["median_us"] for s in symbols) * 1.5
    return {"clock": "host", "device": "cpu", "calls": 5, "warmup": 1, "symbols": symbols,
            "step": {"median_us": step, "min_us": step * 0.9, "max_us": step * 1.1, "total_us": step * 5}}


def write_group(folder: str, variants: Sequence[int] = (0, 0), profiled: bool = False,
                statuses: Optional[dict] = None, pack: bool = True, name: str = "job.tvgroup",
                forward_only: Sequence[int] = ()) -> str:
    """Write a group folder ``folder/name`` with one rank per entry of ``variants`` (the variant
    index of each rank: equal indices, identical traces) and return its path. ``profiled`` records
    kernel timings per rank; ``statuses`` maps a rank to how its run ended (``failed`` ...);
    ``pack`` packs the group as the launcher does when torchrun returns; the ranks in
    ``forward_only`` record no backward chain (their passes exist on one side only)."""
    group = os.path.join(folder, name)
    os.makedirs(group, exist_ok=True)
    world = len(variants)
    statuses = statuses or {}
    for rank, v in enumerate(variants):
        def also(obs, rank=rank):
            obs.note("distributed", {"rank": rank, "local_rank": rank, "world_size": world, "local_world_size": world,
                                     "node_rank": 0, "restart": 0})
            if profiled:
                obs.runtime(0, "forward", "timings", _timings(rank))
                step = _timings(rank)["step"]["median_us"]  # the untimed calls: a little more than the kernels
                obs.runtime(0, "forward", "walls", {"clock": "host", "device": "cpu", "calls": 2,
                                                    "walls_us": [step * 1.2, step * 1.3]})
        status = statuses.get(rank, "ok")
        tb = None if status == "ok" else (
            'Traceback (most recent call last):\n  File "synthetic_model.py", line 30, in <module>\n'
            f'    loss = step()\nRuntimeError: rank {rank} lost its peer\n')
        write_recording(os.path.join(group, f"rank-{rank:05d}.tvrec"), n_symbols=VARIANT_SYMBOLS[v],
                        backward=rank not in forward_only, status=status, traceback_text=tb, also=also,
                        compile_s=1.0 + 0.25 * rank)
    if pack:
        from thundervis.recording.group_store import pack_group
        pack_group(group)
    return group
