"""The executor interface and registry.

An executor says which symbols it can run (:meth:`Executor.can_run`), returns the callable for a
claimed symbol (:meth:`Executor.callable_for`) and, for fusion executors, turns a region of claimed
symbols into one kernel (the ``fuse`` pass asks it). ``torch`` is always available and always last.
Executors know nothing of passes: the pipeline owns the pass list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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

    def chosen_by_default(self, device: str) -> None:
        """Hear that this executor comes from the default order for ``device`` (not named by the
        user); the Triton executor then runs CPU regions through the fast CPU path."""



@dataclass(frozen=True)
class BuiltKernel:
    """What :meth:`FusionExecutor.build_kernel` built for one fusion symbol: the generated ``code``
    in ``language``, a ``note``, and JSON-able executor-specific ``details`` (Triton: cache path,
    grid, plan, parts). The ``fuse`` pass turns it into the :class:`~..ir.KernelRecord`."""

    code: str
    language: str
    note: Optional[str] = None
    details: dict = field(default_factory=dict)


class KernelBuildError(Exception):
    """A fusion executor could not build a kernel for a region; the region runs in torch."""


class FusionExecutor(Executor):
    """An executor that turns regions of claimed prims into kernels.

    The ``fuse`` pass (:mod:`..passes.fuse`) forms regions on dataflow and asks the executor:
    :meth:`region_problem` whether a candidate region can become one kernel (None, or the reason it
    cannot), then :meth:`build_kernel` for each final region (a top-level symbol with
    ``fusion=True`` whose ``subsymbols`` are the members); :meth:`callable_for` returns its launcher.
    """

    fuses = True
    language = "python"

    def region_problem(self, members: list[BoundSymbol], outputs: Optional[list] = None) -> Optional[str]:
        """Return None when ``members`` (in trace order) can become one kernel whose results read
        outside are ``outputs`` (None: every value they produce), else one sentence saying why not."""
        return None

    def prim_problem(self, b: BoundSymbol) -> Optional[str]:
        """Return why prim ``b`` has no lowering in this executor (None: it has one). Executors that
        decide per prim override this and get :meth:`can_run`, :meth:`why_not` and
        :meth:`region_problem` from it."""
        return None

    def lowering_problem(self, b: BoundSymbol) -> Optional[str]:
        """:meth:`prim_problem`, cached per symbol: the fuse pass asks again for every candidate merge."""
        cache = self.__dict__.setdefault("_problems", {})
        hit = cache.get(id(b))
        if hit is None or hit[0] is not b:
            hit = cache[id(b)] = (b, self.prim_problem(b))
        return hit[1]

    def can_run(self, b: BoundSymbol) -> bool:
        return self.available() is None and self.lowering_problem(b) is None

    def why_not(self, b: BoundSymbol) -> str:
        reason = self.available()
        if reason is not None:
            return f"{self.name}: {reason}"
        return self.lowering_problem(b) or f"{self.name} can run {b.sym}"

    def first_member_problem(self, members: list[BoundSymbol]) -> Optional[str]:
        """Return the first member's lowering problem, or None when every member has a lowering."""
        for b in members:
            problem = self.lowering_problem(b)
            if problem is not None:
                return problem
        return None

    def see_decomposed(self, parents: dict) -> None:
        """Hear, before the ``fuse`` pass builds kernels, which decomposed ATen symbols were
        flattened into the prims it fuses (``{uid: symbol}``; a prim's ``origin`` names its parent)."""

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        """Build the kernel of ``fusion`` and return what was built. Raise
        :class:`KernelBuildError` (or anything) when it cannot be built."""
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


# Loads the builtin executors before the first lookup. The package (executors/__init__.py), which
# is always imported before this module, knows its executor modules and sets it: this module imports
# none of them, since each imports this one.
_builtin_loader: list[Callable[[], None]] = []


def set_builtin_loader(load: Callable[[], None]) -> None:
    """Set the function that imports the builtin executor modules (each registers itself); it runs
    before every lookup and must be cheap once done."""
    _builtin_loader[:] = [load]


def _ensure_builtin() -> None:
    for load in _builtin_loader:
        load()
