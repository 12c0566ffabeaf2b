"""Run-time calls of compiled chains, told to one listener.

Work that runs between compiled graphs (collectives issued by DDP's C++ reducer or by FSDP2's
hooks, which torch 2.13 keeps out of Dynamo's graphs) is placed in the recording relative to the
chains that ran before and after it. The backend calls :func:`started` and :func:`finished` around
every call of a forward, backward or inference chain; both cost one global read when no listener
is set. The compiler knows nothing of what the listener does (the core's collective watcher).
"""
from __future__ import annotations

from typing import Any, Optional

# The listener: any object with chain_started(graph, chain) and chain_finished(graph, chain).
_listener: Optional[Any] = None
# More listeners beside it (the core's step-share meter under --profile), each told after it.
_more: tuple = ()


def set_listener(listener: Optional[Any]) -> Optional[Any]:
    """Make ``listener`` receive every chain call from now on (None: nobody); return the previous one."""
    global _listener
    previous, _listener = _listener, listener
    return previous


def add_listener(listener: Any) -> None:
    """Make ``listener`` also receive every chain call (beside the one :func:`set_listener` set)."""
    global _more
    _more = _more + (listener,)


def remove_listener(listener: Any) -> None:
    """Stop telling ``listener`` (added by :func:`add_listener`) about chain calls."""
    global _more
    _more = tuple(x for x in _more if x is not listener)


def started(graph: int, chain: str) -> None:
    """A call of ``chain`` of ``graph`` begins."""
    listener = _listener
    if listener is not None:
        try:
            listener.chain_started(graph, chain)
        except Exception:  # a listener never breaks the user's training
            pass
    for other in _more:
        try:
            other.chain_started(graph, chain)
        except Exception:
            pass


def finished(graph: int, chain: str) -> None:
    """The call of ``chain`` of ``graph`` that :func:`started` announced has returned (or raised)."""
    listener = _listener
    for other in reversed(_more):  # the reverse order of started: the last told of a start hears its end first
        try:
            other.chain_finished(graph, chain)
        except Exception:
            pass
    if listener is not None:
        try:
            listener.chain_finished(graph, chain)
        except Exception:
            pass
