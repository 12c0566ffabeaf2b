"""Run a user's script or module in-process, with every ``torch.compile`` recorded.

:func:`run_target` behaves like ``python SCRIPT ARGS`` / ``python -m MODULE ARGS``: ``sys.argv`` is
set, the script's folder (or the cwd for ``-m``) is first on ``sys.path`` and the code runs as
``__main__`` (``runpy``). While it runs, ``torch.compile`` is replaced by a wrapper that forces our
backend with a :class:`~thundervis.recording.RecordingObserver`, and ``backend="thundervis"``
records to the same file. Whatever happens (normal end, ``sys.exit``, an exception, Ctrl-C, SIGTERM:
:mod:`thundervis.interrupts`)
the run's status is written and the recording is closed cleanly; a SIGKILL leaves every committed
pass readable.

:func:`check_target` and :func:`check_output` (:mod:`thundervis.run_checks`) validate before
anything runs (missing script, syntax error, unwritable output) and raise
:class:`thundervis.cli.UserError` with one sentence.
"""
from __future__ import annotations

import contextlib
import functools
import gc
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
from thundervis.step_share import meter_for, stop_meter
from thundervis.interrupts import HeldSignals, RedeliveredInterrupts, Terminated
# What to run and where to record: checked before anything starts (re-exported from here).
from thundervis.run_checks import DEFAULT_DIR, check_output, check_target, default_output  # noqa: F401

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
    from thundervis.compiler import backend as backend_mod

    script_path, _ = check_target(script, module)
    argv = [script_path or module, *args]
    in_main = threading.current_thread() is threading.main_thread()
    saved = dict(defaults=dict(backend_mod._defaults), argv=sys.argv[:], path=sys.path[:], compile=torch.compile,
                 term=signal.getsignal(signal.SIGTERM) if in_main else None)

    def on_term(signum, frame):
        raise Terminated()

    status, code, tb, froze = "ok", 0, None, False
    started = _Started()
    recorder, held = _open_recording(out, in_main, script_path=script_path, module=module, argv=argv,
                                     executors=executors)
    redeliver = None
    try:
        held.release()
        redeliver = RedeliveredInterrupts() if in_main else None
        if in_main:
            signal.signal(signal.SIGTERM, on_term)
        held.raise_pending()
        _start_compiling(started, recorder, saved["compile"], notes=notes, executors=executors, debug=debug,
                         profile=profile, targets=targets, remat=remat, abstract=abstract)
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(script_path) if script_path else os.getcwd())
        from thundervis.abstract_run import abstract_script
        froze = _freeze_if_cli()
        with abstract_script(recorder, abstract) if abstract is not None else contextlib.nullcontext():
            if script_path:
                runpy.run_path(script_path, run_name="__main__")
            else:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    except BaseException as e:
        status, code, tb = _ended_by(e, recorder, in_main)
    finally:
        _end_run(started, recorder, saved, redeliver, in_main, status, code, tb)
    _let_compiles_finish()
    if froze:  # extension modules (Triton's nanobind types) are torn down at exit only when collectable
        gc.unfreeze()
    return RunResult(code, status, recorder.path)


def _freeze_if_cli() -> bool:
    """When this process is the ``thundervis`` command (its ``__main__`` is our CLI), freeze every
    object alive now, before the script runs; return whether it did. Our imports and torch's are
    done by now, and no user object exists yet: full collections, about 0.3-0.4 CPU-s each over
    torch's heap, then skip what can never become garbage (:mod:`~.compiler.heap_freeze`), and
    everything the script creates is collected as usual. Called in-process (tests, a notebook), the
    caller's objects exist already and could never be collected once frozen: no freeze there."""
    cli = sys.modules.get("thundervis.cli")  # looked up, not imported: the CLI sits above the runner
    if cli is None or getattr(sys.modules.get("__main__"), "main", None) is not getattr(cli, "main", None):
        return False
    from thundervis.compiler.heap_freeze import freeze_imports
    freeze_imports()
    return True


# How long a run's end waits for an Inductor compile an interrupt left running.
_COMPILE_WAIT_S = 60.0


@dataclass
class _Started:
    """What a run starts around the script, each kept as soon as it runs so that the run's end
    stops exactly what was started (None: not started)."""
    aot: object = None
    progress: object = None
    recompiles: object = None
    breaks: object = None
    collectives: object = None
    share: object = None


def _open_recording(out: str, in_main: bool, **run):
    """Create the recording ``out`` and write its run row (``run``: ``start_run``'s arguments but
    ``cwd``); return (the recorder, the :class:`HeldSignals` holding Ctrl-C and SIGTERM meanwhile,
    to release once inside the run's try)."""
    from thundervis.recording import RecordingObserver
    # Ctrl-C or SIGTERM while the file is created and its run row written is held until inside the
    # run's try, so no signal can leave a recording without its end (it would read as `killed`).
    held = HeldSignals(in_main)
    try:
        recorder = RecordingObserver(out)
        recorder.start_run(script=run["script_path"], module=run["module"], argv=run["argv"], cwd=os.getcwd(),
                           executors=run["executors"])
    except BaseException:
        held.release()
        raise
    return recorder, held


def _start_compiling(started: _Started, recorder, saved_compile, *, notes, executors, debug, profile, targets,
                     remat, abstract) -> None:
    """Record ``notes``; start the AOT builds, the progress line and the watchers (kept in
    ``started``); route Dynamo and ``torch.compile`` to a fresh compiler recording into ``recorder``."""
    import torch
    import torch._dynamo
    from thundervis.compiler import backend as backend_mod
    from thundervis.compiler.observer import MultiObserver
    from thundervis.progress import progress_observer
    for event, data in notes:
        recorder.note(event, data)
    aot = started.aot = backend_mod.ahead_of_time(targets, recorder)
    if aot is not None:
        recorder.note("aot_started", {"targets": [f"sm_{a}" for a in aot.targets], "workers": aot.workers})
        aot.start()
    progress = started.progress = progress_observer(executors=executors)  # the live status line (a terminal only)
    observer = recorder if progress is None else MultiObserver(recorder, progress)
    compiler = backend_mod.ThundervisCompiler(executors=executors, debug=debug, observer=observer,
                                              profile=profile, aot=aot, remat=remat,
                                              abstract=abstract is not None)
    started.recompiles = RecompileLimitWatcher(lambda event, data: recorder.note(event, data)).__enter__()
    started.breaks = GraphBreakWatcher(lambda event, data: recorder.note(event, data)).__enter__()
    started.collectives = _watch_collectives(recorder)
    if abstract is None:  # under --profile: the compiled share of each step (thundervis.step_share)
        started.share = meter_for(profile)
    torch._dynamo.reset()
    backend_mod.reset_graph_ids()
    backend_mod.set_defaults(observer=observer, executors=executors, debug=debug, profile=profile, aot=aot,
                             remat=remat, abstract=abstract is not None)
    torch.compile = _routed_compile(saved_compile, compiler)


def _ended_by(e: BaseException, recorder, in_main: bool) -> tuple[str, int, Optional[str]]:
    """Return the run's (status, exit code, traceback) for the exception ``e`` the script ended with
    (:func:`_how_it_ended`), immune to the signals that arrive meanwhile: a SIGTERM (torchrun's, once
    another rank died) is ignored from now on, and a Ctrl-C that cuts the traceback short keeps the
    verdict said before it (:func:`_verdict`)."""
    if in_main:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    status, code, tb = _verdict(e)
    try:
        status, code, tb = _how_it_ended(e, recorder)
    except KeyboardInterrupt:
        pass
    return status, code, tb


def _verdict(e: BaseException) -> tuple[str, int, Optional[str]]:
    """Return the run's (status, exit code, traceback) for the exception ``e`` the script ended with,
    without walking its traceback: a failure's text is its last line only."""
    if isinstance(e, SystemExit):
        code = _exit_code(e)
        return ("ok" if code == 0 else "failed"), code, None
    if isinstance(e, (KeyboardInterrupt, Terminated)):
        return "interrupted", INTERRUPTED_EXIT if isinstance(e, KeyboardInterrupt) else 128 + signal.SIGTERM, None
    return "failed", 1, "".join(traceback.format_exception_only(type(e), e))


def _how_it_ended(e: BaseException, recorder) -> tuple[str, int, Optional[str]]:
    """Return the run's (status, exit code, traceback) for the exception ``e`` the script ended with
    (call while handling it); a failure's traceback is written to stderr."""
    if isinstance(e, (SystemExit, KeyboardInterrupt, Terminated)):
        status, code, _ = _verdict(e)
        return status, code, traceback.format_exc() if status == "interrupted" else None
    tb = _user_traceback()
    sys.stderr.write(tb)
    _note_dynamo_error(recorder, e)
    return "failed", 1, tb


def _end_run(started: _Started, recorder, saved: dict, redeliver, in_main: bool, status: str, code: int,
             tb: Optional[str]) -> None:
    """Stop what the run started, put back what it changed (``saved``: Dynamo's defaults, argv,
    sys.path, ``torch.compile``, the SIGTERM handler), wait for the AOT builds and write the run's
    end; signals wait meanwhile."""
    if in_main:  # first: a SIGTERM from here on must not cut the end short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import torch
    from thundervis.compiler import backend as backend_mod
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
    if redeliver is not None:
        old_int = redeliver.close(old_int)
    try:
        if started.progress is not None:
            started.progress.close()
        for watcher in (started.recompiles, started.breaks):
            if watcher is not None:
                watcher.__exit__(None, None, None)
        if started.collectives is not None:
            try:
                started.collectives.stop()
            except Exception as e:  # the run's end is recorded whatever the watcher does
                recorder.note("collective_watch_failed", {"error": f"{type(e).__name__}: {e}"})
        torch.compile = saved["compile"]
        sys.argv, sys.path[:] = saved["argv"], saved["path"]
        backend_mod.set_defaults(**saved["defaults"])
        stop_meter(started.share, recorder.note)
        if started.aot is not None:
            _finish_aot(started.aot, recorder, status)
        recorder.finish_run(status, code, tb)
        recorder.close()
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, saved["term"])
            signal.signal(signal.SIGINT, old_int)


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
