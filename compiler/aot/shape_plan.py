"""Planning kernels for a GPU target from shapes alone: no GPU, no data.

:class:`PlanningTritonExecutor` (registered as ``triton_planning`` when this module is imported) is
the Triton executor planning every region as if its tensors were on a CUDA device, whatever device
they are on (``meta`` tensors, which carry only shapes, dtypes and strides): it claims and fuses like
the CUDA executor (half-precision types included), generates each region's CUDA plan, and runs a
region, if it is ever called, through the reference interpreter. ``backend.plan_records`` compiles
a function on meta tensors with it and returns the Triton kernel records, which
:class:`.pool.AheadOfTime` compiles for real targets: the kernels of a Llama-7B layer at full size
are planned and compiled on a laptop.
"""
from __future__ import annotations

import importlib.util
from typing import Optional

from ..executors.base import BuiltKernel, KernelBuildError, register_executor
from ..executors.triton_codegen import Unfusable
from ..executors.triton_executor import TritonExecutor, _reference, structure_key
from ..executors.triton_plan import generate
from ..ir import BoundSymbol


class PlanningTritonExecutor(TritonExecutor):
    """The Triton executor planning for a CUDA device, never launching a kernel."""

    def available(self) -> Optional[str]:
        return None if importlib.util.find_spec("triton") is not None else "triton is not installed"

    def device_kind_of(self, device: str) -> str:
        return "cuda"

    def interpreter_mode(self) -> bool:
        return False

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        try:
            ks = generate(list(fusion.subsymbols), list(fusion.outputs), "cuda", title=fusion.sym,
                          phase_limit=self.phase_limit)
        except Unfusable as e:
            raise KernelBuildError(str(e)) from None
        self._built[fusion.uid] = _reference(fusion)
        # the fold key as the Triton executor's: equal regions (repeated layers) are recorded once
        return BuiltKernel(ks.source, "python", ks.note + "; planned for a GPU only (never launched here)",
                           {"grid": ks.grid, "plan": ks.plan, "parts": ks.parts, "planned_only": True,
                            "fold_key": f"{structure_key(fusion, 'cuda')}:{self.phase_limit}"})


register_executor("triton_planning", PlanningTritonExecutor)
