"""Code that Dynamo left to run eagerly at a graph break, recorded as ``dynamo_graph_break`` events.

A graph break splits a frame: Dynamo compiles what it traced so far, runs the call it could not
trace eagerly (the *whole* call: an ``nn.LSTM``, an ``nn.TransformerEncoder`` whose mask check
calls ``Tensor.item()``), and either resumes tracing after it or, when it cannot resume (an RNN
module, a break inside a ``with`` block), runs the rest of the function eagerly. No graph of that
code reaches our backend, so without this nothing in a recording would say it was not compiled.

Dynamo reports each break only on its ``graph_breaks`` log artifact (``TORCH_LOGS=graph_breaks``),
from ``InstructionTranslator.log_graph_break``; :class:`GraphBreakWatcher` listens there (silently:
the artifact is not printed unless the user asked for it) and reads the structured values that
method holds (the exception, the user stack, the translator of the frame being compiled), falling
back to the log text where a torch version moved them. Each event holds: Dynamo's full reason
(first line, explanation, hints), whether tracing resumed, the compiled frame (function, file,
first line), the line that ran eagerly in it (file, line, code), the eager lines (the statement,
or up to the function's end when not resumed), the module that ran eagerly (``LSTM``) and its
attribute (``rnn``), the frames below it down to where Dynamo stopped, and the backend the frame
was compiled for. Under ``thundervis run`` the run installs the watcher; outside one,
:func:`watch_for_session` records the breaks of our backend's frames into the session recording.
"""
from __future__ import annotations

import ast
import functools
import logging
import re
import sys
from typing import Callable, Optional

from thundervis.recording.dynamo_info import compile_id, remember_unresumed

_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
_REASON_LIMIT = 2000
_NOT_RESUMED = "cannot resume from"
_WRAPPERS = ("_wrapped_call_impl", "_call_impl", "_call_impl_with_hooks", "inner")


class GraphBreakWatcher(logging.Handler):
    """A context manager and log handler that calls ``note("dynamo_graph_break", data)`` once per
    distinct graph break (same compiled frame, line and reason counted once, with ``count``);
    while ``active()`` (if given) says False, it does not even read the break."""

    def __init__(self, note: Callable[[str, dict], None], active: Optional[Callable[[], bool]] = None):
        super().__init__(level=logging.DEBUG)
        self._note = note
        self._active = active
        self._seen: set = set()
        self._saved: Optional[tuple] = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._active is not None and not self._active():
                return
            data = describe(record)
            if data is None:
                return
            if not data["resumed"] and data.get("gb_type"):  # the graph this break ends names it
                remember_unresumed(data["at_file"], data["at_line"], data["gb_type"])
            key = (data.get("frame_file"), data.get("frame_function"), data.get("at_line"), data.get("gb_type"),
                   data.get("backend"))  # another backend's break is not ours, and not ours to skip
            if key in self._seen:
                return
            self._seen.add(key)
            self._note("dynamo_graph_break", data)
        except Exception:  # recording is best effort: never break the user's run from a log handler
            pass

    def __enter__(self):
        log = logging.getLogger(_LOGGER)
        self._saved = (log.level, log.propagate)
        if not log.isEnabledFor(logging.DEBUG):
            # Dynamo formats the break only when its artifact logger is enabled; enabled by us
            # alone, it must not reach the user's terminal.
            log.setLevel(logging.DEBUG)
            log.propagate = False
        log.addHandler(self)
        return self

    def __exit__(self, *exc):
        log = logging.getLogger(_LOGGER)
        log.removeHandler(self)
        if self._saved is not None:
            log.setLevel(self._saved[0])
            log.propagate = self._saved[1]


def describe(record: logging.LogRecord) -> Optional[dict]:
    """Return the ``dynamo_graph_break`` data for one record of Dynamo's ``graph_breaks`` logger
    (None when it is not a graph break)."""
    text = record.getMessage()
    if "Graph break" not in text:
        return None
    found = _log_graph_break_locals()
    reason = str(found.get("reason") or _text_reason(text))
    exc = found.get("exc")
    dynamo_text = str(exc) if exc is not None and str(exc) else reason
    root = found.get("self")
    while getattr(root, "parent", None) is not None:
        root = root.parent
    code = getattr(root, "f_code", None)
    stack = [(str(f.filename), int(f.lineno), str(f.name), str(f.line or "").strip())
             for f in (found.get("user_stack") or []) if getattr(f, "lineno", None)]
    data = {"resumed": _NOT_RESUMED not in reason, "gb_type": str(getattr(exc, "gb_type", "") or "") or None,
            "reason": dynamo_text[:_REASON_LIMIT], "compile_id": compile_id(),
            "frame_function": getattr(code, "co_name", None), "frame_file": getattr(code, "co_filename", None),
            "frame_line": getattr(code, "co_firstlineno", None), "backend": _backend_name(root)}
    at = _break_in_frame(stack, code)
    inner = [s for s in stack[stack.index(at) + 1:] if s[2] not in _WRAPPERS] if at is not None else []
    line = getattr(root, "lineno", None)
    if at is None and code is not None and isinstance(line, int):
        # Dynamo's user stack can start below the compiled frame (the call it could not trace):
        # the frame's translator is at that line, and the stack's tail is the callee.
        at = (code.co_filename, line, code.co_name, _line_text(code.co_filename, line))
        inner = _callee(stack)
    if at is None:  # nothing structured: the log's own "Graph break in user code at FILE:LINE"
        m = re.search(r"in user code at (.+):(\d+)", text)
        if not m:
            return None
        at = (m.group(1), int(m.group(2)), data["frame_function"] or "", _line_text(m.group(1), int(m.group(2))))
    data.update(at_file=at[0], at_line=at[1], code=at[3][:300] or _line_text(at[0], at[1]))
    data["inner"] = [{"file": f, "line": ln, "function": fn} for f, ln, fn, _ in inner[-8:]]
    attr, module = _module_of(root, data["code"], inner, dynamo_text)
    data.update(module_attr=attr, module=module)
    first, last = _eager_lines(at[0], at[1], data["resumed"])
    data.update(first_line=first, last_line=last)
    return data


def _backend_name(root) -> Optional[str]:
    """Return the name of the backend the frame is compiled for (``thundervis_backend``,
    ``ThundervisCompiler``, ``inductor``...): Dynamo's debug wrappers unwrapped; None if unknown."""
    fn = getattr(getattr(root, "output", None), "compiler_fn", None)
    for _ in range(8):
        inner = getattr(fn, "compiler_fn", None)
        if inner is None:
            break
        fn = inner
    if fn is None:
        return None
    return str(getattr(fn, "__name__", None) or type(fn).__name__)[:100]


# The backends that are ours: the torch_dynamo_backends entry point and thundervis.jit's compiler.
OUR_BACKENDS = ("thundervis_backend", "ThundervisCompiler")
_session_watcher: list = []


def watch_for_session() -> None:
    """Start (once per process) recording graph breaks of frames compiled by our backend outside
    ``thundervis run`` into the session recording (:mod:`thundervis.session`), which is created on
    the first such break or compile. Under a run, the run's own watcher records them instead."""
    if _session_watcher:
        return

    def note(event: str, data: dict) -> None:
        if data.get("backend") not in OUR_BACKENDS:
            return
        from thundervis import session
        session.note_outside_run(event, data)
    def outside_a_run() -> bool:  # under a run, the run's watcher reads the break; not twice
        from thundervis.compiler import backend
        return backend._defaults["observer"] is None
    _session_watcher.append(GraphBreakWatcher(note, outside_a_run).__enter__())


def _log_graph_break_locals() -> dict:
    """Return the locals of Dynamo's ``log_graph_break`` on this thread's stack, or {}."""
    f = sys._getframe(1)
    for _ in range(60):
        if f is None:
            break
        if f.f_code.co_name == "log_graph_break" and "exc" in f.f_locals:
            return dict(f.f_locals)
        f = f.f_back
    return {}


def _text_reason(text: str) -> str:
    m = re.search(r"Graph Break Reason: (.*?)(?:\n\nUser code traceback:|\Z)", text, re.S)
    return m.group(1).strip() if m else text


def _break_in_frame(stack: list, code) -> Optional[tuple]:
    """Return the stack entry of the compiled frame (its innermost one: the line Dynamo stopped
    at in the function it was compiling), or None."""
    if code is not None:
        for entry in reversed(stack):
            if entry[0] == code.co_filename and entry[2] == code.co_name and entry[1] >= code.co_firstlineno:
                return entry
    return None


def _callee(stack: list) -> list:
    """Return the innermost run of the stack below its last ``nn.Module`` call wrapper (the
    called module's frames, outermost first)."""
    out = []
    for entry in reversed(stack):
        if entry[2] in _WRAPPERS or entry[2] == "<module>":
            break
        out.append(entry)
    return out[::-1]


def _module_of(root, code_line: str, inner: list, dynamo_text: str) -> tuple[Optional[str], Optional[str]]:
    """Return (attribute, class name) of the module the eager line calls: ``self.rnn(...)`` looked
    up on the compiled frame's ``self``, else the class holding the first method below the line,
    else the class Dynamo names in its debug context (``LSTM(16, 16)``)."""
    m = re.search(r"\bself\.([A-Za-z_][\w.]*)\s*\(", code_line or "")
    attr = m.group(1) if m else None
    if attr is not None:
        try:
            obj = getattr(getattr(root, "symbolic_locals", {}).get("self"), "value", None)
            for part in attr.split("."):
                obj = getattr(obj, part)
            import torch
            if isinstance(obj, torch.nn.Module):
                return attr, type(obj).__name__
        except Exception:
            pass
    for f, ln, fn, _ in inner:
        cls = _enclosing_class(f, ln)
        if cls:
            return attr, cls
    m = re.search(r"Developer debug context: ([A-Z]\w*)\(", dynamo_text)
    return attr, (m.group(1) if m else None)


@functools.lru_cache(maxsize=64)
def _tree(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read())
    except Exception:
        return None


def _enclosing_class(path: str, line: int) -> Optional[str]:
    """Return the innermost class whose body holds ``line`` of ``path``, or None."""
    tree, best = _tree(path), None
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.name if best is not None else None


def _eager_lines(path: str, line: int, resumed: bool) -> tuple[int, int]:
    """Return the lines that ran eagerly: the statement at ``line`` when Dynamo resumed after it,
    else from it to the end of its function."""
    tree = _tree(path)
    if tree is None:
        return line, line
    stmt, func = None, None
    for node in ast.walk(tree):
        end = getattr(node, "end_lineno", None)
        if end is None or not (node.lineno <= line <= end):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (func is None or node.lineno > func.lineno):
            func = node
        elif isinstance(node, ast.stmt) and not isinstance(node, ast.ClassDef) and (stmt is None or node.lineno >= stmt.lineno):
            stmt = node
    if not resumed and func is not None:
        return line, func.end_lineno
    if stmt is not None:
        return stmt.lineno, stmt.end_lineno
    return line, line


def _line_text(path: str, line: int) -> str:
    import linecache
    return linecache.getline(path, line).strip()[:300]
