"""In-process recording for ``thundervis.jit``: what a notebook (or any Python session) compiled.

Outside ``thundervis run`` nothing records by default, so :func:`jit` gives every function or
module it compiles the process's *session recording*: one recording file in a temporary folder,
created on first use, written as compiles happen like any recording (each pass committed), and
closed with status ``ok`` when the process exits. :func:`recording_of` returns the path of that
file and the graph ids that a compiled object (or the object it was made from) produced, which is
what ``thundervis.api.show(compiled_model)`` reads. Under ``thundervis run`` (a process-wide observer
is set) :func:`jit` records into the run's recording instead, as before.
``torch.compile(model, backend="thundervis")`` outside a run records into the same session
recording (:func:`backend_observer`, hooked into the compiler by ``thundervis/__init__``), and the
graph breaks of frames either compiles are recorded there too
(:func:`thundervis.dynamo_breaks.watch_for_session`).
"""
from __future__ import annotations

import atexit
import os
import sys
import tempfile
import threading
import weakref
from typing import Optional

# Loaded with the session: ``thundervis.jit`` is the entry point that brings in the compiler (and
# sets TRITON_INTERPRET before Triton where there is no GPU).
from thundervis.compiler import backend as backend_mod
from thundervis.compiler.observer import CompileObserver, MultiObserver

_lock = threading.Lock()
_session: dict = {"recorder": None, "dir": None}
# compiled object or the object it was made from -> the graph ids it compiled (a set that grows
# as Dynamo recompiles); weak keys so a session keeps no model alive.
_graphs_of: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_graphs_by_id: dict[int, set] = {}  # for objects that take no weak reference


def session_recording_path() -> Optional[str]:
    """Return the path of this process's session recording (None until something compiled)."""
    rec = _session["recorder"]
    return rec.path if rec is not None else None


def _recorder():
    """Return the session's RecordingObserver, creating the file on first use."""
    with _lock:
        if _session["recorder"] is None:
            from thundervis.recording import RecordingObserver
            folder = tempfile.mkdtemp(prefix="thundervis-session-")
            rec = RecordingObserver(os.path.join(folder, "session.tvrec"))
            rec.start_run(script=None, module="<python session>", argv=list(sys.argv), cwd=os.getcwd())
            _session["recorder"], _session["dir"] = rec, folder
            atexit.register(_finish)
        return _session["recorder"]


def _finish() -> None:
    rec = _session["recorder"]
    if rec is not None:
        try:
            rec.finish_run("ok", 0)
        finally:
            rec.close()


def note_outside_run(event: str, data: dict) -> None:
    """Record ``event`` (a graph break of a frame compiled by our backend) into the session
    recording, unless ``thundervis run`` is recording this process (its own watcher notes it)."""
    if backend_mod._defaults["observer"] is None:
        _recorder().note(event, data)


def backend_observer():
    """Return the observer ``torch.compile(backend="thundervis")`` records into outside a run and
    without one given: the session recording (see the module doc)."""
    return _recorder()


def flush() -> None:
    """Write the session recording's pending symbol rows, so a reader need not derive them."""
    rec = _session["recorder"]
    if rec is not None:
        rec.write_symbol_rows()


def _remember(obj, graphs: set) -> None:
    try:
        _graphs_of[obj] = graphs
    except TypeError:  # no weak reference possible: keep it by id (the object itself is not held)
        _graphs_by_id[id(obj)] = graphs


def recording_of(obj) -> Optional[tuple[str, tuple[int, ...]]]:
    """Return (session recording path, graph ids) for an object compiled by :func:`jit` in this
    process (the compiled object or the function/module it was made from); None otherwise."""
    path = session_recording_path()
    if path is None:
        return None
    try:
        graphs = _graphs_of.get(obj)
    except TypeError:
        graphs = None
    if graphs is None:
        graphs = _graphs_by_id.get(id(obj))
    if graphs is None:
        return None
    return path, tuple(sorted(graphs))


def jit(fn_or_module, **options):
    """Return ``fn_or_module`` compiled by thundervis (``torch.compile`` with our backend; options as
    :func:`thundervis.compiler.jit`). Unless an ``observer`` is given or ``thundervis run`` set one,
    every graph it compiles is recorded into the session recording (see the module doc)."""
    if options.get("observer") is not None or backend_mod._defaults["observer"] is not None:
        return backend_mod.jit(fn_or_module, **options)
    graphs: set = set()

    class _NoteGraphs(CompileObserver):
        def graph_started(self, graph: int, info: dict) -> None:
            graphs.add(graph)

    options["observer"] = MultiObserver(_recorder(), _NoteGraphs())
    compiled = backend_mod.jit(fn_or_module, **options)
    _remember(compiled, graphs)
    _remember(fn_or_module, graphs)
    return compiled
