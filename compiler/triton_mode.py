"""Triton's interpreter mode: without CUDA, Triton kernels run only in Triton's interpreter, and
Triton decides that when it is first imported (torch's AOTAutograd imports it), so
``TRITON_INTERPRET=1`` must be set before that.

:func:`set_early` runs when ``thundervis`` or ``thundervis.compiler`` is imported and needs no torch:
where no GPU device node exists at all (Linux without ``/dev/nvidiactl``, ``/dev/nvidia0`` or
``/dev/kfd``) there can be no CUDA, so the flag is set at once. :func:`set_for_torch` runs before
anything that compiles (the backend) and asks torch. Neither overrides a ``TRITON_INTERPRET`` the user
set, and neither changes anything once Triton is imported.
"""
from __future__ import annotations

import os
import sys

_GPU_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def _undecided() -> bool:
    return os.environ.get("TRITON_INTERPRET") is None and "triton" not in sys.modules


def set_early() -> None:
    """Set ``TRITON_INTERPRET=1`` when this machine certainly has no GPU (no torch import)."""
    if _undecided() and sys.platform.startswith("linux") and not any(os.path.exists(p) for p in _GPU_NODES):
        os.environ["TRITON_INTERPRET"] = "1"


def set_for_torch() -> None:
    """Set ``TRITON_INTERPRET=1`` when torch sees no CUDA (imports torch)."""
    if not _undecided():
        return
    import torch
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
