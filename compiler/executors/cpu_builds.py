"""Inductor builds of CPU regions, off the training thread: the training process's side of
:mod:`.cpu_build_worker`.

One worker process per training process, started at the first build request (``python -m`` of the
worker module, JSON lines over pipes: nothing is pickled across). A request carries the region's IR
(the serialized trace format) and its inputs' sizes, strides and dtypes; the worker compiles and
saves Inductor's artifact in a private folder of ours (``mkdtemp``, mode 0700, removed at exit),
and a reader thread here files the answer. That artifact is Inductor's own cache format, which
Inductor reads with pickle as it reads its cache in any ``torch.compile`` run: it comes only from
our worker, this run, never from a recording or the persistent compile cache.
The region keeps running through torch meanwhile. Requests are written by a writer thread and
the built code is loaded by the reader thread (:func:`load`: seconds per region here, and the
first load imports most of Inductor), so the training thread only polls :meth:`Build.ready` and
takes ``Build.fn``.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Optional

from ..ir import BoundSymbol, Trace, TensorProxy
from ..serialize import trace_to_dict

WORKER_MODULE = "thundervis.compiler.executors.cpu_build_worker"


class Build:
    """One requested region build: ``ready()`` once answered and loaded; then ``path`` (the
    artifact folder), ``seconds`` (the worker's compile time) and ``fn`` (the loaded callable), or
    ``error`` (one line)."""

    def __init__(self, rid: int):
        self.id = rid
        self.path: Optional[str] = None
        self.seconds: Optional[float] = None
        self.fn: Optional[Callable] = None
        self.error: Optional[str] = None
        self._done = threading.Event()

    def ready(self) -> bool:
        """Return True once the worker answered (or died)."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait at most ``timeout`` seconds for the answer; return :meth:`ready`."""
        return self._done.wait(timeout)

    def _answer(self, data: dict) -> None:
        if isinstance(data.get("error"), str):
            self.error = data["error"][:300]
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
        env = dict(os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     text=True, bufsize=1)
        self.pending: dict[int, Build] = {}
        self.lock = threading.Lock()
        self.ids = itertools.count()
        # Requests go through a queue and a writer thread: the pipe fills while the worker starts
        # or compiles, and the training thread must never wait on it.
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._write, name="thundervis-cpu-build-writer", daemon=True).start()
        threading.Thread(target=self._read, name="thundervis-cpu-build-reader", daemon=True).start()

    def submit(self, request: Callable[[], dict]) -> Build:
        with self.lock:
            build = Build(next(self.ids))
            self.pending[build.id] = build
        self.outbox.put((build.id, request))
        return build

    def _write(self) -> None:
        while True:
            item = self.outbox.get()
            if item is None:
                break
            rid, make = item
            try:  # serialized here, not on the training thread
                line = json.dumps(dict(make(), id=rid, out=os.path.join(self.folder, f"region{rid}"))) + "\n"
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
            self.proc.kill()
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


def region_request(fusion: BoundSymbol, steps: list[BoundSymbol], args: tuple) -> Callable[[], dict]:
    """Return a function making the worker request of ``fusion`` whose torch path calls ``steps``
    (see ``cpu_path.region_steps``) on ``args`` (the real input tensors: their metadata is read
    now; the IR is serialized when the function is called, on the writer thread)."""
    specs = [{"shape": list(a.shape), "stride": list(a.stride()), "offset": int(a.storage_offset()),
              "dtype": str(a.dtype).removeprefix("torch.")} for a in args]
    return lambda: _request(fusion, steps, specs)


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


def load(build: Build) -> Callable:
    """Return the callable of a finished :class:`Build` (Inductor's artifact, loaded here)."""
    import torch._inductor
    from torch._inductor.standalone_compile import CompiledArtifact
    return CompiledArtifact.load(path=build.path, format="unpacked")
