"""Executors: who runs each symbol. See :mod:`.base` for the interface."""
from __future__ import annotations

import importlib.util

from .base import (Executor, FusionExecutor, KernelBuildError, available_executors, get_executor,  # noqa: F401
                   register_executor)


def fusion_executor_names(device: str = "cpu") -> list[str]:
    """Return the default fusion executors for a device type, best first (torch not included).

    On CUDA: ``nvfuser`` when it imports, then ``triton``. Without CUDA: ``triton`` under the Triton
    interpreter. Executors that are not registered or not importable are left out.
    """
    import torch

    known = set(available_executors())
    names = []
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    if cuda and "nvfuser" in known and any(importlib.util.find_spec(m) is not None
                                           for m in ("nvfuser_direct", "nvfuser")):
        names.append("nvfuser")
    if "triton" in known and importlib.util.find_spec("triton") is not None:
        if cuda or (device == "cpu" and not torch.cuda.is_available()):
            names.append("triton")
        elif device == "cpu":
            from .triton_executor import interpreting
            if interpreting():
                names.append("triton")
    return names
