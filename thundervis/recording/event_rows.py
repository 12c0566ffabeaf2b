"""The ``events`` table of a recording, read once per revision under a cap.

A run notes a few events per graph and kernel; a file someone sends may hold millions (3 M rows,
218 MB: reading them all took 113 s and 3 GB, and each view asks for several event names, each a
scan of the whole table). So :class:`EventRows` reads the first :data:`MAX_EVENTS` rows once per
revision of the file, a page at a time, keeps them raw, and decodes the JSON of only the events
asked for, once per name. Events past the cap are not read (:attr:`EventRows.capped` says so).
"""
from __future__ import annotations

import threading
from typing import Optional

from .model import Event
from .typed import load_json, row_checker

MAX_EVENTS = 100_000
EVENT_PAGE = 5_000

_CHECK_EVENTS = row_checker("events", ("id", "graph_id", "chain", "event", "data", "at"),
                            ("int", "int?", "text?", "text", "text?", "num"))


class EventRows:
    """The events of the recording ``rec`` (a :class:`~.reader.Recording`)."""

    def __init__(self, rec):
        self.rec = rec
        self._lock = threading.Lock()
        # (revision, raw rows, {event name or None: [Event]}, {event name: raw rows})
        self._cache: Optional[tuple] = None
        self.capped = False

    def _rows(self) -> tuple:
        revision = self.rec.revision()
        with self._lock:
            cached = self._cache
        if cached is not None and cached[0] == revision:
            return cached
        store, rows, last = self.rec.store, [], -(1 << 63)
        while len(rows) < MAX_EVENTS:
            page = store.rows("SELECT id, graph_id, chain, event, data, at FROM events WHERE id > ? ORDER BY id"
                              " LIMIT ?", (last, min(EVENT_PAGE, MAX_EVENTS - len(rows))))
            if not page:
                break
            _CHECK_EVENTS(page, store.path)
            last = page[-1][0]
            rows.extend(page)
        self.capped = len(rows) >= MAX_EVENTS and bool(store.rows("SELECT 1 FROM events WHERE id > ? LIMIT 1", (last,)))
        by_name: dict = {}
        for r in rows:
            by_name.setdefault(r[3], []).append(r)
        cached = (revision, rows, {}, by_name)
        with self._lock:
            self._cache = cached
        return cached

    def events(self, event: Optional[str] = None, limit: int = MAX_EVENTS) -> list[Event]:
        """Return the events (all, or those named ``event``) among the first :data:`MAX_EVENTS`
        rows, in order, at most ``limit``; ``data`` is the decoded JSON."""
        _, rows, parsed, by_name = self._rows()
        out = parsed.get(event)
        if out is None:
            path = self.rec.path
            out = parsed[event] = [Event(g, c, e, load_json(d, "events.data", path) if d is not None else None, at)
                                   for _, g, c, e, d, at in (rows if event is None else by_name.get(event, ()))]
        return list(out[:limit])
