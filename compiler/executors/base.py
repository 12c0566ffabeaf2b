"""The executor interface and registry.

An executor says which symbols it can run (:meth:`Executor.can_run`), returns the callable for a
claimed symbol (:meth:`Executor.callable_for`) and, for fusion executors, turns a region of claimed
symbols into one kernel (later passes). ``torch`` is always available and always last.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import BoundSymbol


class Executor:
    """Base class: subclasses set ``name`` and implement :meth:`can_run` and :meth:`callable_for`."""

    name = "executor"
    fuses = False

    def available(self) -> Optional[str]:
        """Return None when usable in this process, else one sentence saying why not."""
        return None

    def can_run(self, b: BoundSymbol) -> bool:
        """Return True when this executor runs ``b`` (top level, or a prim after flattening)."""
        raise NotImplementedError

    def why_not(self, b: BoundSymbol) -> str:
        """Return why :meth:`can_run` refused ``b`` (shown as the fallback reason)."""
        return f"{self.name} cannot run {b.sym}"

    def callable_for(self, b: BoundSymbol) -> Callable:
        """Return the Python callable that runs ``b`` with its arguments."""
        raise NotImplementedError


_REGISTRY: dict[str, Callable[[], Executor]] = {}


def register_executor(name: str, factory: Callable[[], Executor]) -> None:
    """Register an executor factory under ``name``."""
    _REGISTRY[name] = factory


def get_executor(name: str) -> Executor:
    """Return the executor named ``name``; raise KeyError with the known names."""
    _ensure_builtin()
    if name not in _REGISTRY:
        raise KeyError(f"unknown executor {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]()


def available_executors() -> list[str]:
    """Return the names of the registered executors."""
    _ensure_builtin()
    return sorted(_REGISTRY)


def _ensure_builtin() -> None:
    if "torch" not in _REGISTRY:
        from . import torch_executor  # noqa: F401  (registers itself)
