"""The observer interface through which the compiler reports what it does.

The compiler never imports the recording code; ``thundervis`` core implements this interface
(:class:`CompileObserver`) and hands an instance to the backend. Every method has a no-op default, so
an observer implements only what it needs.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Optional

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

    def kernel_compiled(self, graph: int, chain: str, kernel: str, target: str, build: dict) -> None:
        """A kernel was compiled ahead of time for GPU ``target`` (``sm_90``), or failed to:
        ``build`` is :func:`.aot.pool._build_record`'s dict (status ``ok``, ``failed``,
        ``unplanned`` or ``unfinished``; stages, resources, occupancy, instruction mix, line maps).
        Called from a worker-result thread."""

    def memory_ledger(self, graph: int, ledger: dict) -> None:
        """The memory ledger of ``graph``'s forward/backward pair was computed
        (:func:`.ledger.graph_ledger`'s dict; ``{"error": ...}`` when it could not be)."""

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


# The observer, graph and chain being compiled in this context: executors that build a callable
# which may change course at run time (a kernel falling back to torch on its first launch) capture
# a reporter while they build it, so the run-time event reaches the recording with its chain.
_COMPILING: contextvars.ContextVar = contextvars.ContextVar("thundervis_compiling", default=None)


@contextlib.contextmanager
def compiling(observer: CompileObserver, graph: int, chain: str):
    """Within the ``with`` body, :func:`runtime_reporter` reports to ``observer`` for ``chain``."""
    token = _COMPILING.set((observer, graph, chain))
    try:
        yield
    finally:
        _COMPILING.reset(token)


def runtime_reporter() -> Callable[[str, Any], None]:
    """Return ``report(event, data)`` sending a runtime event for the chain being compiled now
    (a no-op outside :func:`compiling`). An observer that fails never breaks the run."""
    current = _COMPILING.get()
    if current is None:
        return lambda event, data: None
    observer, graph, chain = current

    def report(event: str, data: Any) -> None:
        try:
            observer.runtime(graph, chain, event, data)
        except Exception:  # recording is best effort; the user's training goes on
            pass
    return report


# Set by thundervis core, which this package never imports: what the ``torch_dynamo_backends``
# entry point records into when no observer is given and no ``thundervis run`` set one (the
# process's session recording), and what runs once the backend module is loaded (the session's
# graph-break watcher, which must listen before Dynamo traces the first frame).
_session_hooks: dict = {"observer": None, "loaded": None}


def set_session_hooks(observer: Optional[Callable[[], CompileObserver]] = None,
                      loaded: Optional[Callable[[], None]] = None) -> None:
    """Set the session hooks: ``observer()`` returns the session's observer, ``loaded()`` runs
    when the backend module is imported (None: no hook)."""
    _session_hooks["observer"], _session_hooks["loaded"] = observer, loaded


def session_observer() -> Optional[CompileObserver]:
    """Return the session's observer (None when core set no hook or the hook failed)."""
    hook = _session_hooks["observer"]
    try:
        return hook() if hook is not None else None
    except Exception:  # a session that cannot record never stops a compile
        return None


def backend_loaded() -> None:
    """Run the ``loaded`` hook (the backend module calls it once, at import)."""
    hook = _session_hooks["loaded"]
    if hook is not None:
        try:
            hook()
        except Exception:
            pass
