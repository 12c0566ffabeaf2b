"""The one door to the compiler for the front ends that run recorded code again.

``thundervis bisect``, the TUI's and the widget's bisect run every recorded pass of a chain in torch,
and the last one as its kernels. Triton decides its interpreter mode when it is first imported, so
the mode has to be settled (:func:`thundervis.compiler.triton_mode.set_for_torch`) before anything
that may import Triton: importing this module does that first, then loads the tools. Front ends
import what they run from here, never from ``thundervis.compiler`` (the import contracts in
pyproject.toml check it). Importing this module imports torch.
"""
from __future__ import annotations

from thundervis.compiler import triton_mode as _triton_mode

_triton_mode.set_for_torch()  # before anything below imports Triton

from thundervis.bisect import BisectError, BisectReport, bisect, report_lines  # noqa: E402,F401
from thundervis.rerun import RerunError  # noqa: E402,F401

__all__ = ["BisectError", "BisectReport", "RerunError", "bisect", "report_lines"]
