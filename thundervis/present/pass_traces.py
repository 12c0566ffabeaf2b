"""The one cache of pass traces (and of what views derive from them: printed lines, diff rows),
shared by the TUI and the widget: bounded memos, safe to use from worker threads, and a second
thread asking for an entry being made waits for the first instead of making it again."""
from __future__ import annotations

import threading
from typing import Callable, Optional

from .errors import data_errors


class PassTraces:
    """Traces of ``rec``'s passes, memoised (the last ``size``; None: all), plus named memos for
    values derived from them (:meth:`cached_value`)."""

    def __init__(self, rec, size: Optional[int] = 6):
        self.rec = rec
        self.size = size
        self._caches: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._inflight: dict[tuple, threading.Event] = {}

    def trace(self, graph: int, chain: str, index: int):
        """Return the validated trace of one pass (``DataError`` for an unknown or damaged pass)."""
        from thundervis.recording import PassRef
        return self.cached_value("trace", (graph, chain, index),
                                 lambda: data_errors(self.rec.pass_trace, PassRef(graph, chain, index)), self.size)

    def cached_value(self, cache: str, key: tuple, make: Callable[[], object], size: Optional[int] = 8):
        """Return ``make()`` memoised under ``key`` in memo ``cache`` (the oldest entries dropped
        past ``size``); a thread asking for a key another thread is making waits for it."""
        full = (cache,) + key
        with self._lock:
            store = self._caches.setdefault(cache, {})
            if key in store:
                return store[key]
            wait = self._inflight.get(full)
            if wait is None:
                self._inflight[full] = threading.Event()
        if wait is not None:
            wait.wait()
            with self._lock:
                if key in store:
                    return store[key]
            return make()  # the first maker failed: try (and fail) here too
        try:
            value = make()
            with self._lock:
                while size is not None and len(store) >= size:
                    store.pop(next(iter(store)))
                store[key] = value
            return value
        finally:
            with self._lock:
                self._inflight.pop(full).set()

    def has(self, cache: str, key: tuple) -> bool:
        """Return whether ``key`` is already in memo ``cache``."""
        with self._lock:
            return key in self._caches.get(cache, {})

    def clear(self) -> None:
        """Drop every memoised value (a reloaded recording, or benchmarks measuring cold steps)."""
        with self._lock:
            for store in self._caches.values():
                store.clear()


def too_large_lines(graph: int, chain: str, index: int, name: str, err) -> str:
    """Return what a view shows in place of a pass trace too large to show (``err``: the
    recording's ``TooLarge``): a comment line naming the pass and its size, e.g. ``# graph 0 ·
    forward · after 11 codegen: the trace is too large to show (251 MiB)``."""
    shown = getattr(err, "shown", None) or "size unknown"
    return f"# graph {graph} · {chain} · after {index} {name}: the trace is too large to show ({shown})\n"
