"""How a recorded run ended, as every view words it: ``ls``'s status line, the TUI's top bar,
banner and empty trace pane, the widget's header and banner.

A run that is still being recorded reads ``recording live``; one that ended reads ``run ok``,
``run failed`` ...; one that ended badly has a banner line (``the script failed (exit 1):
ZeroDivisionError: division by zero``); a run without a compiled graph says so (``no graph
compiled yet`` while it runs, ``no graph was compiled in this run`` after).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

RUNNING = "running"
NO_GRAPH_YET = "no graph compiled yet"
NO_GRAPH = "no graph was compiled in this run"


@dataclass(frozen=True)
class RunStatus:
    """A run's end as views word it: ``status`` (``ok``, ``failed``, ``running`` ...),
    ``exit_code`` (None: not ended, or not recorded), ``label`` (``run ok``, ``recording live``),
    ``text`` (``ok (exit 0)``), ``ended`` (the banner of a run that did not end well, "" else) and
    ``no_graph`` (what a view says in place of graphs when none was compiled, "" else). Recorded
    strings are as recorded: views make them visible."""

    status: str
    exit_code: Optional[int]
    label: str
    text: str
    ended: str
    no_graph: str

    def as_json(self) -> dict:
        """Return the fields as a JSON object."""
        return {"status": self.status, "exit_code": self.exit_code, "label": self.label, "text": self.text,
                "ended": self.ended, "no_graph": self.no_graph}


def run_status(run, n_graphs: int) -> RunStatus:
    """Return the :class:`RunStatus` of ``run`` (a ``recording.model.Run``: ``status``,
    ``exit_code``, ``traceback``) with ``n_graphs`` compiled graphs."""
    status = str(run.status)
    code = run.exit_code if isinstance(run.exit_code, int) and not isinstance(run.exit_code, bool) else None
    exit_text = f" (exit {code})" if code is not None else ""
    ended = ""
    if status not in ("ok", RUNNING):
        last = (run.traceback or "").strip().splitlines()[-1:] or [""]
        ended = f"the script {status}{exit_text}" + (f": {last[0]}" if last[0] else "")
    no_graph = "" if n_graphs else (NO_GRAPH_YET if status == RUNNING else NO_GRAPH)
    label = "recording live" if status == RUNNING else f"run {status}"
    return RunStatus(status, code, label, status + exit_text, ended, no_graph)
