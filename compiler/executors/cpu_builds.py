"""Inductor builds of CPU regions, off the training thread: the training process's side of
:mod:`.cpu_build_worker`.

One worker process per training process, started at the first build request (``python -m`` of the
worker module, JSON lines over pipes: nothing is pickled across). A request carries the region's IR
(the serialized trace format) and its inputs' sizes, strides and dtypes; the worker compiles the
region ahead of time with AOTInductor into one plain shared library, ``region.so`` (C++ kernels and
C++ wrapper), in a private folder of ours, and a reader thread here files the answer. The region
keeps running through torch meanwhile; the training thread only polls :meth:`Build.ready`.

What is loaded, and why it is safe: :func:`load` opens exactly ``<folder>/region<id>/region.so``,
where ``<folder>`` is this run's ``mkdtemp`` folder (mode 0700, removed at exit) and ``<id>`` the
request's number; a path the worker answers with is only compared with that one, never opened
otherwise. The file must be a regular file (not a link) owned by this user and writable by nobody
else. It is handed to torch's C++ AOTI runner (``dlopen`` and a call table: no Python, no pickle,
no Inductor import in this process). Nothing comes from a recording, the persistent compile cache
or Inductor's shared cache: the worker compiles with Inductor's cache folder and its temporary
folder (where Inductor keeps precompiled headers) inside ours. A load
costs milliseconds, so the reader thread does it; the code it loads never ran any of our Python.
The callable checks each call's inputs against the sizes, strides and dtypes it was built for
(:meth:`LoadedRegion.accepts`): AOTInductor's code assumes them.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Optional

from ..ir import BoundSymbol, Trace, TensorProxy
from ..serialize import trace_to_dict

WORKER_MODULE = "thundervis.compiler.executors.cpu_build_worker"
# The file name of a build inside its request's ``out`` folder; the worker (a child process that
# imports this module for it) writes exactly this name, and nothing else there is ever loaded.
SHARED_LIBRARY = "region.so"
# The worker's environment names the training process and the build folder: a worker whose
# training process is gone removes that folder and ends (``cpu_build_worker._watch_parent``).
PARENT_ENV, FOLDER_ENV = "THUNDERVIS_CPU_BUILD_PARENT", "THUNDERVIS_CPU_BUILD_FOLDER"
# Inductor's switches for caches shared between machines ("0": off, whatever else is set).
REMOTE_CACHES = ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
                 "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE")


class Build:
    """One requested region build: ``ready()`` once answered and loaded; then ``path`` (the
    shared library), ``seconds`` (the worker's compile time) and ``fn`` (the loaded
    :class:`LoadedRegion`), or ``error`` (one line). ``expected``: the only path the answer may
    name (None: any, for tests); ``inputs``: the (shape, stride, offset, dtype) it is built for;
    ``priority``: what the worker said it ran at (None until it answers)."""

    def __init__(self, rid: int, expected: Optional[str] = None, inputs: tuple = ()):
        self.id = rid
        self.expected, self.inputs = expected, inputs
        self.path: Optional[str] = None
        self.seconds: Optional[float] = None
        self.fn: Optional[Callable] = None
        self.error: Optional[str] = None
        self.priority: Optional[str] = None  # what the worker ran at ("SCHED_IDLE", "nice 10", ...)
        self._done = threading.Event()

    def ready(self) -> bool:
        """Return True once the worker answered (or died)."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait at most ``timeout`` seconds for the answer; return :meth:`ready`."""
        return self._done.wait(timeout)

    def _answer(self, data: dict) -> None:
        if isinstance(data.get("priority"), str):
            self.priority = data["priority"][:40]
        if isinstance(data.get("error"), str):
            self.error = data["error"][:300]
        elif self.expected is not None and data.get("path") != self.expected:
            self.error = "the build worker answered with a file outside its own folder"
        elif isinstance(data.get("path"), str) and isinstance(data.get("seconds"), (int, float)):
            self.path, self.seconds = data["path"], float(data["seconds"])
            try:  # here, on the reader thread: loading takes seconds the training thread must not wait
                self.fn = load(self)
            except Exception as e:
                first = str(e).splitlines()[0][:160] if str(e) else ""
                self.error = f"loading the built code failed: {type(e).__name__}: {first}"
        else:
            self.error = "the build worker gave a malformed answer"
        self._done.set()


class _Worker:
    """The worker process, its reader thread and the builds still waiting for an answer."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="thundervis-cpu-builds-")  # 0700: ours alone
        # Its compile shares the cores with training; no pool of compile processes of its own, so
        # that ending the worker ends every compile it started.
        # Inductor's own cache lives in our folder too, and its remote caches (which a user's
        # environment may turn on) stay off: nothing of a shared cache is reused. So does its
        # temporary folder, where it keeps its precompiled headers whatever the cache folder says
        # (``/tmp/torchinductor_<user>``, which anyone may have made first): each run builds its
        # own, 16 CPU-seconds once, which saves 3 of the 11 each region's build costs without.
        tmp = os.path.join(self.folder, "tmp")
        os.mkdir(tmp, 0o700)
        env = dict(os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1", TMPDIR=tmp,
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(self.folder, "inductor-cache"),
                   **dict.fromkeys(REMOTE_CACHES, "0"),
                   **{PARENT_ENV: str(os.getpid()), FOLDER_ENV: self.folder})
        # Its own process group, so that closing it also ends the C++ compilers it started, but
        # the training's session: with autogroup scheduling (on by default in most Linux
        # distributions) each session is a group the kernel shares the CPU between fairly, so a
        # worker in a session of its own took half of a contended core whatever its SCHED_IDLE
        # said (measured: 153 CPU ticks against a normal process's 148 on one core; in the
        # training's session, 1 against 231). The worker makes its group itself on Python 3.10.
        # It runs in our folder: ``python -m`` puts the working directory first on the import
        # path, and the training's (a ``json.py`` or ``torch/`` of the user's) must not shadow it.
        group = {"process_group": 0} if sys.version_info >= (3, 11) else {}
        self.proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     text=True, bufsize=1, cwd=self.folder, **group)
        self.pending: dict[int, Build] = {}
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.warmed = False
        # Requests go through a queue and a writer thread: the pipe fills while the worker starts
        # or compiles, and the training thread must never wait on it.
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._write, name="thundervis-cpu-build-writer", daemon=True).start()
        threading.Thread(target=self._read, name="thundervis-cpu-build-reader", daemon=True).start()

    def submit(self, request: Callable[[], dict]) -> Build:
        with self.lock:
            rid = next(self.ids)
            build = Build(rid, os.path.join(self._out(rid), SHARED_LIBRARY), getattr(request, "inputs", ()))
            self.pending[build.id] = build
        self.outbox.put((build.id, request))
        return build

    def warm(self) -> None:
        """Ask the worker once for its warm-up compile (see ``cpu_build_worker.warm``); no answer
        is waited for."""
        with self.lock:
            if self.warmed:
                return
            self.warmed, rid = True, next(self.ids)
        self.outbox.put((rid, lambda: {"warm": True}))

    def _write(self) -> None:
        while True:
            item = self.outbox.get()
            if item is None:
                break
            rid, make = item
            try:  # serialized here, not on the training thread
                line = json.dumps(dict(make(), id=rid, out=self._out(rid))) + "\n"
            except Exception as e:
                with self.lock:
                    build = self.pending.pop(rid, None)
                if build is not None:
                    build._answer({"error": f"the region could not be serialized ({type(e).__name__}: {str(e)[:120]})"})
                continue
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (OSError, ValueError) as e:
                self._fail(f"the build worker is gone ({type(e).__name__})")
                break
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def _out(self, rid: int) -> str:
        return os.path.join(self.folder, f"region{rid}")

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                build = self.pending.pop(data.get("id"), None) if isinstance(data, dict) else None
            if build is not None:
                build._answer(data)
        self._fail(f"the build worker ended (exit {self.proc.poll()})")

    def _fail(self, why: str) -> None:
        with self.lock:
            pending, self.pending = list(self.pending.values()), {}
        for b in pending:
            b._answer({"error": why})

    def close(self) -> None:
        self.outbox.put(None)  # the writer closes the worker's stdin: it ends after its build
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
        try:  # the worker's group: it and the compilers it left running (by its id, ours alone)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
        self.proc.poll()
        shutil.rmtree(self.folder, ignore_errors=True)


_worker: Optional[_Worker] = None
_worker_lock = threading.Lock()


def _get_worker() -> _Worker:
    global _worker
    with _worker_lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
            atexit.register(_worker.close)
        return _worker


class _Request:
    """A worker request made on the writer thread (``request()`` -> dict); ``inputs``: the
    (shape, stride, offset, dtype) of each input, which the loaded code will check."""

    def __init__(self, fusion: BoundSymbol, steps: list[BoundSymbol], args: tuple):
        self.inputs = tuple((tuple(a.shape), tuple(a.stride()), int(a.storage_offset()), a.dtype) for a in args)
        self._fusion, self._steps = fusion, steps

    def __call__(self) -> dict:
        specs = [{"shape": list(shape), "stride": list(stride), "offset": offset,
                  "dtype": str(dtype).removeprefix("torch.")} for shape, stride, offset, dtype in self.inputs]
        return _request(self._fusion, self._steps, specs)


def region_request(fusion: BoundSymbol, steps: list[BoundSymbol], args: tuple) -> Callable[[], dict]:
    """Return a function making the worker request of ``fusion`` whose torch path calls ``steps``
    (see ``cpu_path.region_steps``) on ``args`` (the real input tensors: their metadata is read
    now; the IR is serialized when the function is called, on the writer thread)."""
    return _Request(fusion, steps, args)


def _request(fusion: BoundSymbol, steps: list[BoundSymbol], specs: list) -> dict:
    region = fusion.replace(subsymbols=tuple(steps))
    inputs = tuple(dict.fromkeys(p for p in fusion.args if isinstance(p, TensorProxy)))
    trace = Trace(name="region", inputs=inputs, symbols=(region,), outputs=tuple(fusion.outputs),
                  pass_name="cpu_region")
    return {"region": trace_to_dict(trace), "args": specs}


def submit(request: Callable[[], dict]) -> Build:
    """Queue a :func:`region_request` for the worker (started if need be); return its :class:`Build`."""
    try:
        return _get_worker().submit(request)
    except OSError as e:  # no process can start here: the region keeps torch
        build = Build(-1)
        build._answer({"error": f"the build worker did not start ({type(e).__name__}: {e})"})
        return build


class LoadedRegion:
    """A built region's code, loaded: ``region(*tensors)`` returns the tuple of its outputs (the
    caller first checks :meth:`accepts`: the code assumes the sizes and strides it was built for)."""

    def __init__(self, run: Callable, inputs: tuple):
        self._run, self.inputs = run, inputs

    def accepts(self, args: tuple) -> bool:
        """Return True when ``args`` are CPU tensors of the sizes, strides, offsets and dtypes built for."""
        if len(args) != len(self.inputs):
            return False
        for a, (shape, stride, offset, dtype) in zip(args, self.inputs):
            if (getattr(a, "dtype", None) is not dtype or a.device.type != "cpu" or a.shape != shape
                    or a.stride() != stride or a.storage_offset() != offset):
                return False
        return True

    def __call__(self, *args) -> tuple:
        return tuple(self._run(list(args)))


def warm_up() -> None:
    """Start the worker (if need be) and have it pay its first compile's one-off costs now, while a
    region that qualifies proves hot; a worker that cannot start is left to :func:`submit` to say."""
    try:
        _get_worker().warm()
    except OSError:
        pass


def load(build: Build) -> LoadedRegion:
    """Return the code of a finished :class:`Build`: its shared library, checked (see the module
    doc) and loaded with torch's C++ AOTI runner. Raises OSError for a file that is missing or
    not ours alone, RuntimeError for one that does not load."""
    path = build.path or ""
    if build.expected is not None and path != build.expected:
        raise OSError("not the file this build was asked to write")
    st = os.lstat(path)  # FileNotFoundError (an OSError) when missing
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError("the built file is not a regular file of this user's alone")
    import torch
    runner = torch._C._aoti.AOTIModelContainerRunnerCpu(path, 1)
    return LoadedRegion(runner.run, build.inputs)
