"""Why Dynamo compiled a graph: graph-break and recompile reasons, read while the backend runs.

torch has no public hook for these, so this module reads the places Dynamo leaves them during a
compile, each guarded so a torch upgrade degrades to "unknown" rather than breaking a run:

- ``torch._dynamo.utils.graph_break_reasons``: Dynamo appends a ``GraphCompileReason`` before it
  compiles the partial graph that a graph break ends, so entries added since the previous graph
  belong to the graph being compiled now.
- the per-thread Dynamo metrics context's ``recompile_reason``: set from the first failing guard
  when a frame is compiled again (new shapes, new types, ...).
- ``CompileContext.current_compile_id()``: Dynamo's ``frame/compile`` id (``1/0``, ``1/1`` ...).
- ``torch._dynamo.utils.get_compilation_metrics()``: one entry per frame Dynamo tried to compile
  (the last 64); one with a ``fail_type`` is a function Dynamo could not trace at all (an RNN
  module, a graph break it cannot resume from, such as one inside an unsupported ``with`` block),
  which then runs eagerly without any graph reaching the backend (:class:`FrameFailures`).

Not available from here: which guard failed when Dynamo gives up on a frame (the recompile limit).
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
        return {"compile_id": compile_id(), "recompile_reason": _recompile_reason(),
                "graph_break_reason": self._new_break()}

    def _new_break(self) -> Optional[str]:
        breaks = _break_list()
        if len(breaks) < self._seen_breaks:  # torch._dynamo.reset() cleared the list
            self._seen_breaks = 0
        new = breaks[self._seen_breaks:]
        self._seen_breaks = len(breaks)
        texts = []
        for r in new:
            where, reason = "", str(getattr(r, "reason", r))
            try:
                if r.user_stack:
                    f = r.user_stack[-1]
                    where = f" at {f.filename}:{f.lineno}"
                    if reason == _UNRESUMED_NAME and (f.filename, f.lineno) in _UNRESUMED:
                        reason = f"{_UNRESUMED[(f.filename, f.lineno)]} (not resumed: the rest of the function ran eagerly)"
            except Exception:
                pass
            texts.append(f"{reason}{where}".strip())
        return "\n".join(texts) or None


# A graph break Dynamo cannot resume from reaches it as ``GraphCompileReason("step_unsupported")``,
# its real reason only in its log: thundervis.dynamo_breaks hands that over, by (file, line), as
# Dynamo logs it (before it compiles the graph the break ends).
_UNRESUMED_NAME = "step_unsupported"
_UNRESUMED: dict = {}


def remember_unresumed(file: str, line: int, reason: str) -> None:
    """Keep Dynamo's one-line ``reason`` for the graph break it could not resume from at ``line``
    of ``file``, for the graph that break ends (bounded: the first 1000 places)."""
    if len(_UNRESUMED) < 1000 or (file, line) in _UNRESUMED:
        _UNRESUMED[(file, line)] = reason


def _break_list() -> list:
    try:
        from torch._dynamo.utils import graph_break_reasons
        return graph_break_reasons
    except Exception:
        return []


def compile_id() -> Optional[str]:
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



# A frame's failure text kept in a recording: Dynamo's reason (a first line, its Explanation and
# Hints) is a few hundred characters; a user frame's exception text can be anything.
_REASON_LIMIT = 2000


class FrameFailures:
    """Reads the functions Dynamo could not compile at all since it was created, from Dynamo's
    compilation metrics: each ran eagerly, and no graph of it reached the backend, so nothing else
    in a recording would say so. Dynamo giving up after its recompile limit is left out (the run
    records that from its own warning, with the last guard failure)."""

    def __init__(self):
        self._seen = {_metrics_key(m) for m in _metrics()}

    def new_failures(self) -> list:
        """Return one dict per frame that failed since the last call: ``function``, ``file``,
        ``line`` (where the function starts), ``fail_type``, ``reason`` (Dynamo's text, capped),
        ``at_file`` / ``at_line`` (the user line Dynamo stopped at, None when unknown)."""
        out, keys = [], set()
        for m in _metrics():
            key = _metrics_key(m)
            keys.add(key)
            if key in self._seen:
                continue
            failure = _failure(m)
            if failure is not None:
                out.append(failure)
        # Dynamo keeps only its last entries: what left its list can never come back, so the keys
        # of the current list are all there is to remember.
        self._seen = keys
        return out


def _metrics() -> list:
    try:
        from torch._dynamo.utils import get_compilation_metrics
        return list(get_compilation_metrics())
    except Exception:
        return []


def _metrics_key(m) -> tuple:
    return (str(getattr(m, "compile_id", None)), getattr(m, "start_time_us", None) or getattr(m, "start_time", None),
            getattr(m, "co_name", None), getattr(m, "co_filename", None))


def _failure(m) -> Optional[dict]:
    """Return the failure of one compilation-metrics entry, or None (it compiled, it names no
    function, or it is the recompile limit)."""
    try:
        fail_type, name = getattr(m, "fail_type", None), getattr(m, "co_name", None)
        if not fail_type or not name:
            return None
        reason = str(getattr(m, "fail_reason", None) or "")
        if "recompile limit" in reason.lower() or "cache_size_limit" in reason:
            return None

        def line(v) -> Optional[int]:
            try:
                return int(v) if v is not None else None
            except (TypeError, ValueError):
                return None
        at_file = getattr(m, "fail_user_frame_filename", None)
        return {"function": str(name), "file": str(getattr(m, "co_filename", None) or "") or None,
                "line": line(getattr(m, "co_firstlineno", None)), "fail_type": str(fail_type),
                "reason": reason[:_REASON_LIMIT], "at_file": str(at_file) if at_file else None,
                "at_line": line(getattr(m, "fail_user_frame_lineno", None))}
    except Exception:  # torch moved things: nothing to say rather than a broken run
        return None
