"""Why Dynamo compiled a graph: graph-break and recompile reasons, read while the backend runs.

torch has no public hook for these, so this module reads the places Dynamo leaves them during a
compile, each guarded so a torch upgrade degrades to "unknown" rather than breaking a run:

- ``torch._dynamo.utils.graph_break_reasons``: Dynamo appends a ``GraphCompileReason`` before it
  compiles the partial graph that a graph break ends, so entries added since the previous graph
  belong to the graph being compiled now.
- the per-thread Dynamo metrics context's ``recompile_reason``: set from the first failing guard
  when a frame is compiled again (new shapes, new types, ...).
- ``CompileContext.current_compile_id()``: Dynamo's ``frame/compile`` id (``1/0``, ``1/1`` ...).

Not available from here: which guard failed when Dynamo gives up on a frame (the recompile limit),
and graph breaks that make Dynamo skip a frame entirely (no graph reaches the backend).
"""
from __future__ import annotations

from typing import Optional


class DynamoReasons:
    """Reads the compile reasons for each graph the backend receives, in order."""

    def __init__(self):
        self._seen_breaks = len(_break_list())

    def current(self) -> dict:
        """Return ``{"compile_id", "recompile_reason", "graph_break_reason"}`` (values may be None)
        for the graph Dynamo is compiling now."""
        return {"compile_id": _compile_id(), "recompile_reason": _recompile_reason(),
                "graph_break_reason": self._new_break()}

    def _new_break(self) -> Optional[str]:
        breaks = _break_list()
        if len(breaks) < self._seen_breaks:  # torch._dynamo.reset() cleared the list
            self._seen_breaks = 0
        new = breaks[self._seen_breaks:]
        self._seen_breaks = len(breaks)
        texts = []
        for r in new:
            where = ""
            try:
                if r.user_stack:
                    f = r.user_stack[-1]
                    where = f" at {f.filename}:{f.lineno}"
            except Exception:
                pass
            texts.append(f"{getattr(r, 'reason', r)}{where}".strip())
        return "\n".join(texts) or None


def _break_list() -> list:
    try:
        from torch._dynamo.utils import graph_break_reasons
        return graph_break_reasons
    except Exception:
        return []


def _compile_id() -> Optional[str]:
    try:
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
        return str(cid) if cid is not None else None
    except Exception:
        return None


def _recompile_reason() -> Optional[str]:
    try:
        from torch._dynamo.utils import get_metrics_context
        ctx = get_metrics_context()
        metrics = getattr(ctx, "_metrics", {})
        reason = metrics.get("recompile_reason")
        return str(reason) if reason else None
    except Exception:
        return None

