"""The observer interface through which the compiler reports what it does.

The compiler never imports the recording code; ``thundervis`` core implements this interface
(:class:`CompileObserver`) and hands an instance to the backend. Every method has a no-op default, so
an observer implements only what it needs.
"""
from __future__ import annotations

from typing import Any, Optional

from .ir import KernelRecord, Trace


class CompileObserver:
    """Receives compile events. All methods are optional no-ops."""

    def graph_started(self, graph: int, info: dict) -> None:
        """A Dynamo graph arrived (``info``: n_inputs, n_nodes, reason, ...)."""

    def pass_done(self, graph: int, chain: str, index: int, name: str, trace: Trace,
                  duration_s: float, changed: bool) -> None:
        """A pass of ``chain`` finished, producing ``trace``."""

    def kernels_built(self, graph: int, chain: str, kernels: list[KernelRecord]) -> None:
        """A fusion executor built kernels (one :class:`~.ir.KernelRecord` per fusion symbol;
        :func:`~.serialize.kernel_to_dict` gives its JSON)."""

    def chain_failed(self, graph: int, chain: Optional[str], error: str, tb: str) -> None:
        """Compiling ``chain`` (None: the whole graph) failed; it runs eagerly instead."""

    def graph_finished(self, graph: int, compile_s: float) -> None:
        """Compilation of ``graph`` ended (all chains compiled so far)."""

    def runtime(self, graph: int, chain: str, event: str, data: Any) -> None:
        """A runtime event (profiling samples, fallbacks at run time)."""


class MultiObserver(CompileObserver):
    """Forwards every event to several observers."""

    def __init__(self, *observers: CompileObserver):
        self.observers = [o for o in observers if o is not None]

    def __getattribute__(self, name):
        if name.startswith("_") or name == "observers":
            return object.__getattribute__(self, name)
        obs = object.__getattribute__(self, "observers")

        def fan_out(*args, **kwargs):
            for o in obs:
                getattr(o, name)(*args, **kwargs)
        return fan_out
