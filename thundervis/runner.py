"""Run a user's script or module in-process, with every ``torch.compile`` recorded.

:func:`run_target` behaves like ``python SCRIPT ARGS`` / ``python -m MODULE ARGS``: ``sys.argv`` is
set, the script's folder (or the cwd for ``-m``) is first on ``sys.path`` and the code runs as
``__main__`` (``runpy``). While it runs, ``torch.compile`` is replaced by a wrapper that forces our
backend with a :class:`~thundervis.recording.RecordingObserver`, and ``backend="thundervis"``
records to the same file. Whatever happens (normal end, ``sys.exit``, an exception, Ctrl-C, SIGTERM:
:mod:`thundervis.interrupts`)
the run's status is written and the recording is closed cleanly; a SIGKILL leaves every committed
pass readable.

:func:`check_target` and :func:`check_output` validate before anything runs (missing script, syntax
error, unwritable output) and raise :class:`thundervis.cli.UserError` with one sentence.
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.util
import inspect
import logging
import os
import re
import runpy
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from thundervis.dynamo_breaks import GraphBreakWatcher
from thundervis.errors import UserError
from thundervis.interrupts import HeldSignals, RedeliveredInterrupts, Terminated

DEFAULT_DIR = "thundervis-runs"
INTERRUPTED_EXIT = 130


@dataclass(frozen=True)
class RunResult:
    """How a run ended: exit code, status (ok, failed, interrupted) and the recording's path."""

    exit_code: int
    status: str
    path: str


_RECOMPILE_LIMIT_LOGGER = "torch._dynamo.convert_frame"


class RecompileLimitWatcher(logging.Handler):
    """Records Dynamo giving up on a frame after its recompile limit as a ``dynamo_recompile_limit``
    event (limit name and value, function, file, line, last guard failure).

    Dynamo reports it only as a warning of its ``convert_frame`` logger (``torch._dynamo hit
    config.recompile_limit (8)`` with the function and the last reason as arguments) and then runs
    the frame eagerly from then on, so the watcher reads that log record."""

    def __init__(self, note: Callable[[str, dict], None]):
        super().__init__(level=logging.WARNING)
        self._note = note

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if not str(record.msg).startswith("torch._dynamo hit config."):
                return
            args = record.args if isinstance(record.args, tuple) else ()
            limit_type, limit, func, reason = (list(args) + [None] * 4)[:4]
            m = re.match(r"'(?P<name>.*)' \((?P<file>.*):(?P<line>\d+)\)$", str(func or ""))
            self._note("dynamo_recompile_limit", {
                "limit_type": str(limit_type), "limit": limit if isinstance(limit, int) else str(limit),
                "function": m.group("name") if m else str(func), "file": m.group("file") if m else None,
                "line": int(m.group("line")) if m else None, "reason": str(reason) if reason is not None else None})
        except Exception:  # recording is best effort; never break the user's run from a log handler
            pass

    def __enter__(self):
        logging.getLogger(_RECOMPILE_LIMIT_LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger(_RECOMPILE_LIMIT_LOGGER).removeHandler(self)


def check_target(script: Optional[str], module: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """Check that the script exists and compiles (or the module can be found and compiles); return
    (absolute script path or None, source path to compile-check or None). Raises UserError."""
    if module:
        saved_path = sys.path[:]
        sys.path.insert(0, os.getcwd())  # as `python -m` does
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            raise UserError(f"cannot find module {module!r} ({e}).") from None
        finally:
            sys.path[:] = saved_path
        if spec is None:
            raise UserError(f"cannot find module {module!r}.")
        origin = spec.origin
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            main = os.path.join(list(spec.submodule_search_locations)[0], "__main__.py")
            if not os.path.exists(main):
                raise UserError(f"{module!r} is a package and cannot be run directly (it has no __main__.py).")
            origin = main
        if origin and origin.endswith(".py"):
            _compile_check(origin)
        return None, origin
    path = os.path.abspath(script)
    if not os.path.exists(path):
        raise UserError(f"script {script} does not exist.")
    if os.path.isdir(path):
        raise UserError(f"{script} is a directory, not a Python script.")
    _compile_check(path)
    return path, path


def _compile_check(path: str) -> None:
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror}).") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise UserError(f"{path} has a syntax error at line {e.lineno}: {e.msg}.") from None
    except ValueError as e:  # null bytes
        raise UserError(f"{path} is not valid Python source ({e}).") from None


def default_output(stem: str, directory: str = DEFAULT_DIR, suffix: str = ".tvrec") -> str:
    """Return a new path ``DIRECTORY/<stem>-<YYYYmmdd-HHMMSS><suffix>`` that does not exist yet
    (``-2``, ``-3``... added before the suffix when it does); ``suffix`` ``.tvgroup`` names a
    group folder."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = os.path.join(directory, f"{stem}-{stamp}")
    path, n = base + suffix, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}{suffix}"
    return path


def check_output(path: str) -> str:
    """Create the output's folder if needed and check the file can be created; return its absolute
    path. Raises UserError when it exists or cannot be written."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise UserError(f"output {path} is a directory; give a file name such as run.tvrec.")
    if os.path.exists(path):
        raise UserError(f"output {path} already exists; choose another name or remove it.")
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output folder {folder} ({e.strerror}).") from None
    probe = path + ".probe"
    try:
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as e:
        raise UserError(f"cannot write the recording to {path} ({e.strerror}).") from None
    return path


def _routed_compile(original: Callable, backend) -> Callable:
    """Return a ``torch.compile`` replacement that forces ``backend`` (mode/options are Inductor's
    and are dropped; ``dynamic`` defaults to False: the IR has static shapes, so each new size is a
    Dynamo recompile (its recompile limit applies and is recorded); a script's own ``dynamic=True``
    graphs are compiled once per shape by the backend, compiler/shape_specialize.py)."""
    @functools.wraps(original)
    def compile(model=None, **kwargs):
        dropped = {k: kwargs.pop(k) for k in ("backend", "mode", "options") if kwargs.get(k) is not None}
        named = dropped.get("backend")
        if named is not None and (named == "thundervis" or isinstance(named, type(backend))):
            dropped.pop("backend")  # ours already: nothing overridden
        if dropped:  # shown with the run's summary (present.status.compile_options_not_used)
            backend.options.observer.note("compile_options_dropped", {
                k: v if isinstance(v, str) else getattr(v, "__name__", type(v).__name__)
                for k, v in dropped.items()})
        if kwargs.get("dynamic") is None:
            kwargs["dynamic"] = False
        return original(_traceable_module_call(model), backend=backend, **kwargs)
    return compile


def _traceable_module_call(model):
    """Return what ``torch.compile`` should get for ``model``: ``Module.compile()`` hands it the
    module's bound ``_call_impl``, a frame of torch's own that Dynamo skips; when the module's
    ``forward`` is torch's own too (``nn.Sequential``, a built-in layer), Dynamo then captures
    nothing and the module runs eagerly, silently (pytorch#150915). ``torch.compile(module)`` puts
    such a module behind a frame Dynamo traces (``external_utils.wrap_inline``); this does the same
    for ``Module.compile()``. Anything else, or a torch without those helpers: ``model`` as given."""
    import torch
    if not (inspect.ismethod(model) and model.__func__ is torch.nn.Module._call_impl):
        return model
    try:
        from torch._dynamo import external_utils, trace_rules
        forward = model.__self__.forward
        if inspect.ismethod(forward) and trace_rules.check(forward):
            return external_utils.wrap_inline(model)
    except Exception:  # torch moved them: Module.compile() behaves as torch makes it
        pass
    return model


def run_target(*, script: Optional[str], module: Optional[str], args: Sequence[str], out: str,
               executors: Optional[Sequence[str]] = None, debug: bool = False, profile=None,
               notes: Sequence[tuple[str, object]] = (), targets=None, remat: Optional[str] = None,
               abstract=None) -> RunResult:
    """Run ``script`` (or ``module``) with ``args`` in this process, recording into ``out`` (which
    :func:`check_output` has validated). Return how it ended; the recording is closed.
    ``profile``: a ``compiler.profiling.ProfileSettings`` (kernel timings, input capture) or None.
    ``notes``: (event, JSON-able data) pairs recorded as events before the script starts (a
    distributed worker records its rank this way). ``targets``: GPU targets every Triton kernel is
    compiled for ahead of time, in worker processes while the script runs (``"sm_80,sm_90"``;
    ``"local"``: the local GPU's architecture, none without CUDA; None: none); the run waits for
    pending builds at its end (bounded, ``$THUNDERVIS_AOT_WAIT_S``). ``abstract``: an
    :class:`~.abstract_run.AbstractSettings` to run the script on fake tensors (None: a real run)."""
    import torch
    import torch._dynamo
    from thundervis.compiler import backend as backend_mod
    from thundervis.recording import RecordingObserver

    script_path, _ = check_target(script, module)
    argv = [script_path or module, *args]
    in_main = threading.current_thread() is threading.main_thread()
    saved_defaults = dict(backend_mod._defaults)
    saved_argv, saved_path, saved_compile = sys.argv[:], sys.path[:], torch.compile
    saved_term = signal.getsignal(signal.SIGTERM) if in_main else None

    def on_term(signum, frame):
        raise Terminated()

    status, code, tb = "ok", 0, None
    watcher = breaks = collectives = aot = progress = None
    from thundervis.compiler.observer import MultiObserver
    from thundervis.progress import progress_observer
    # Ctrl-C or SIGTERM while the file is created and its run row written is held until inside the
    # try below, so no signal can leave a recording without its end (it would read as `killed`).
    held = HeldSignals(in_main)
    redeliver = None
    try:
        recorder = RecordingObserver(out)
        recorder.start_run(script=script_path, module=module, argv=argv, cwd=os.getcwd(), executors=executors)
    except BaseException:
        held.release()
        raise
    try:
        held.release()
        redeliver = RedeliveredInterrupts() if in_main else None
        if in_main:
            signal.signal(signal.SIGTERM, on_term)
        held.raise_pending()
        for event, data in notes:
            recorder.note(event, data)
        aot = backend_mod.ahead_of_time(targets, recorder)
        if aot is not None:
            recorder.note("aot_started", {"targets": [f"sm_{a}" for a in aot.targets], "workers": aot.workers})
            aot.start()
        progress = progress_observer(executors=executors)  # the live status line (a terminal only)
        observer = recorder if progress is None else MultiObserver(recorder, progress)
        compiler = backend_mod.ThundervisCompiler(executors=executors, debug=debug, observer=observer,
                                                  profile=profile, aot=aot, remat=remat,
                                                  abstract=abstract is not None)
        watcher = RecompileLimitWatcher(lambda event, data: recorder.note(event, data)).__enter__()
        breaks = GraphBreakWatcher(lambda event, data: recorder.note(event, data)).__enter__()
        collectives = _watch_collectives(recorder)
        torch._dynamo.reset()
        backend_mod.reset_graph_ids()
        backend_mod.set_defaults(observer=observer, executors=executors, debug=debug, profile=profile, aot=aot,
                                 remat=remat, abstract=abstract is not None)
        torch.compile = _routed_compile(saved_compile, compiler)
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(script_path) if script_path else os.getcwd())
        from thundervis.abstract_run import abstract_script
        with abstract_script(recorder, abstract) if abstract is not None else contextlib.nullcontext():
            if script_path:
                runpy.run_path(script_path, run_name="__main__")
            else:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = _exit_code(e)
        status = "ok" if code == 0 else "failed"
    except (KeyboardInterrupt, Terminated) as e:
        status, tb = "interrupted", traceback.format_exc()
        code = INTERRUPTED_EXIT if isinstance(e, KeyboardInterrupt) else 128 + signal.SIGTERM
    except BaseException as e:
        status, code = "failed", 1
        tb = _user_traceback()
        sys.stderr.write(tb)
        _note_dynamo_error(recorder, e)
    finally:
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        if redeliver is not None:
            old_int = redeliver.close(old_int)
        try:
            if in_main:  # a second SIGTERM while the end is written must not cut it short
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if progress is not None:
                progress.close()
            if watcher is not None:
                watcher.__exit__(None, None, None)
            if breaks is not None:
                breaks.__exit__(None, None, None)
            if collectives is not None:
                try:
                    collectives.stop()
                except Exception as e:  # the run's end is recorded whatever the watcher does
                    recorder.note("collective_watch_failed", {"error": f"{type(e).__name__}: {e}"})
            torch.compile = saved_compile
            sys.argv, sys.path[:] = saved_argv, saved_path
            backend_mod.set_defaults(**saved_defaults)
            if aot is not None:
                _finish_aot(aot, recorder, status)
            recorder.finish_run(status, code, tb)
            recorder.close()
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, saved_term)
                signal.signal(signal.SIGINT, old_int)
    _let_compiles_finish()
    return RunResult(code, status, recorder.path)


# How long a run's end waits for an Inductor compile an interrupt left running.
_COMPILE_WAIT_S = 60.0


def _let_compiles_finish() -> None:
    """Wait (bounded, a second Ctrl-C ends it) for the Inductor compiles of CPU regions that an
    interrupt left running (``cpu_path.unfinished_compiles``), saying so: Python's exit ending
    such a thread inside C++ aborts the process ("terminate called without an active
    exception", exit -6) after the recording was closed. The recording is complete already."""
    from thundervis.compiler.executors.cpu_path import unfinished_compiles, wait_for_compiles
    if not unfinished_compiles():
        return
    print("thundervis: waiting for the CPU region compile the interrupt left running "
          "(Ctrl-C again to leave now; the recording is complete)", file=sys.stderr, flush=True)
    try:
        wait_for_compiles(_COMPILE_WAIT_S)
    except KeyboardInterrupt:
        pass


def _finish_aot(aot, recorder, status: str) -> None:
    """Wait (bounded) for the ahead-of-time builds still running and record how they went; an
    interrupted run does not wait."""
    pending = aot.pending()
    if pending and status != "interrupted":
        print(f"thundervis: waiting for {pending} GPU kernel builds "
              f"({', '.join(f'sm_{a}' for a in aot.targets)})...", file=sys.stderr, flush=True)
    try:
        stats = aot.finish(0.0 if status == "interrupted" else None)
        recorder.note("aot_finished", stats)
    except Exception as e:  # the run's end is recorded whatever the builds do
        recorder.note("aot_failed", {"error": f"{type(e).__name__}: {e}"})


def _watch_collectives(recorder):
    """Start recording the collectives that run between compiled graphs
    (:mod:`thundervis.collective_watch`); return the watcher, or None where torch has no
    ``torch.distributed`` or the watcher cannot start (the run goes on without it)."""
    import torch.distributed
    if not torch.distributed.is_available():
        return None
    from thundervis.collective_watch import CollectiveWatcher
    try:
        return CollectiveWatcher(lambda event, data: recorder.note(event, data)).start()
    except Exception as e:  # a torch whose c10d ops differ: record why, never stop the run
        recorder.note("collective_watch_failed", {"error": f"{type(e).__name__}: {e}"})
        return None


def _exit_code(e: SystemExit) -> int:
    """Return the process exit code Python would use for ``e`` (printing a message like it)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _note_dynamo_error(recorder, e: BaseException) -> None:
    """Record a Dynamo error that ended the script (``fullgraph=True`` on a function Dynamo cannot
    trace raises it instead of running the function eagerly) as a ``dynamo_raised`` event: the
    matching failed frame is then the script's error, not a function that ran eagerly
    (``present.status.dynamo_fallbacks``)."""
    if not type(e).__module__.startswith("torch._dynamo"):
        return
    try:
        recorder.note("dynamo_raised", {"fail_type": type(e).__qualname__, "reason": str(e)[:2000]})
    except Exception:  # recording is best effort
        pass


def _user_traceback() -> str:
    """Return the current exception's traceback without the runner's and runpy's own frames."""
    etype, value, tb = sys.exc_info()
    frames = traceback.extract_tb(tb)
    skip = 0
    for i, f in enumerate(frames):
        if f.filename in (__file__, runpy.__file__) or f.filename.startswith("<frozen runpy"):
            skip = i + 1
        else:
            break
    while tb is not None and skip:
        tb, skip = tb.tb_next, skip - 1
    return "".join(traceback.format_exception(etype, value, tb))
