"""Executors: who runs each symbol. See :mod:`.base` for the interface."""
from __future__ import annotations

import importlib
import importlib.util

from .base import (Executor, FusionExecutor, KernelBuildError, available_executors, get_executor,  # noqa: F401
                   register_executor, set_builtin_loader)

# Modules that register an executor when imported; a missing optional module is skipped.
_BUILTIN_MODULES = ("torch_executor", "triton_executor", "nvfuser_executor", "inductor_executor")

_BUILTIN_LOADED: list = []  # [True] once every builtin module was tried


def _load_builtin() -> None:
    # Tracked apart from the registry: one builtin module imported on its own (cpu_path imports
    # torch_executor) registers itself, and the others must still be loaded.
    if _BUILTIN_LOADED:
        return
    for mod in _BUILTIN_MODULES:
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ImportError:
            # Optional executors whose module (or library) is missing are simply not registered.
            if mod == "torch_executor":
                raise
    _BUILTIN_LOADED.append(True)


set_builtin_loader(_load_builtin)  # base looks executors up; this package knows which exist


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
