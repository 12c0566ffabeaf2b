"""The one door to the compiler for the front ends that run recorded code again.

Bisect (every recorded pass of a chain run in torch, the last one as its kernels), re-running a
kernel and writing its repro script build kernels from the recording, so they may import Triton.
Triton decides its interpreter mode when it is first imported, so the mode has to be settled
(:func:`thundervis.compiler.triton_mode.set_for_torch`) before anything that may import Triton:
importing this module does that first, then loads the tools. The CLI's commands, the TUI and the
widget import what they run from here, never from ``thundervis.compiler`` or the tools themselves
(the import contracts in pyproject.toml check it). Importing this module imports torch.
"""
from __future__ import annotations

from thundervis.compiler import triton_mode as _triton_mode

_triton_mode.set_for_torch()  # before anything below imports Triton

from thundervis.bisect import BisectError, BisectReport, bisect, report_lines  # noqa: E402,F401
from thundervis.repro import write_repro  # noqa: E402,F401
from thundervis.rerun import (RerunError, rerun_kernel, unavailable_executors,  # noqa: E402,F401
                              unavailable_note)

__all__ = ["BisectError", "BisectReport", "RerunError", "bisect", "report_lines", "rerun_kernel",
           "unavailable_executors", "unavailable_note", "write_repro"]
