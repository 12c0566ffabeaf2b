"""Compiling a CPU region with Inductor inside this process, on a fresh thread waited for.

The training path no longer does this (it builds in a worker process, :mod:`.cpu_builds`): these
are for tools and tests that want a region's Inductor code at once, and for the run's end, which
waits for one an interrupt left running (:func:`unfinished_compiles`).
"""
from __future__ import annotations

import threading
import time
import warnings
from typing import Callable


def compile_in_fresh_thread(fn: Callable, args: tuple) -> dict:
    """Compile ``fn`` for inputs like ``args`` (:func:`compile_region`) on a new thread and wait for
    it; return ``{"fn", "seconds"}`` or ``{"error"}``. A forward region's call runs inside
    AOTAutograd's ``autograd.Function``, whose thread-local dispatch state breaks tracing; a new
    thread starts clean. Waiting matters: tracing sets process-wide flags that would break the
    user's compiled calls running meanwhile, so nothing runs beside it, not even a compile an
    interrupt left running (waited for up to 30 s, else ``{"error"}``)."""
    job: dict = {}
    # One compile at a time (see above), also after an interrupt left one running (a notebook's
    # interrupted cell run again): waited for, within bounds; past them this region keeps torch.
    if not wait_for_compiles(_EARLIER_COMPILE_WAIT_S):
        job["error"] = RuntimeError(f"an earlier region compile an interrupt left running has not ended "
                                    f"after {_EARLIER_COMPILE_WAIT_S:g} s")
        return job
    examples = [a.detach() if hasattr(a, "detach") else a for a in args]  # metadata is what counts
    done = threading.Event()

    def work():
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                job["fn"] = compile_region(fn, examples)
            job["seconds"] = time.perf_counter() - t0
        except BaseException as e:  # handed to the region, which keeps torch
            job["error"] = e
        finally:
            with _compiling_lock:
                _compiling.discard(done)
            done.set()
    # A daemon, so that a compile that never ends cannot keep the process alive; one a Ctrl-C left
    # running (the interrupt ends the wait, not the compile) is waited for before the process
    # exits (wait_for_compiles): ended by Python's exit inside C++, it aborts the process. Waited
    # for through an Event, not join(): Python 3.11's join() interrupted by a Ctrl-C marks the
    # thread stopped while it still runs.
    with _compiling_lock:
        _compiling.add(done)
    threading.Thread(target=work, name=COMPILE_THREAD, daemon=True).start()
    done.wait()
    return job


COMPILE_THREAD = "thundervis-inductor-region"
_EARLIER_COMPILE_WAIT_S = 30.0
_compiling: set = set()  # the ``done`` events of the compile threads still running
_compiling_lock = threading.Lock()


def unfinished_compiles() -> int:
    """Return how many :func:`compile_in_fresh_thread` threads are still compiling (an interrupt
    ended the wait for them, not their compile)."""
    with _compiling_lock:
        return len(_compiling)


def wait_for_compiles(timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for the :func:`unfinished_compiles` to end; return True
    when none is left. A KeyboardInterrupt during the wait is the caller's."""
    deadline = time.monotonic() + timeout
    with _compiling_lock:
        pending = list(_compiling)
    for done in pending:
        done.wait(max(0.0, deadline - time.monotonic()))
    return not unfinished_compiles()


def compile_region(fn: Callable, args: tuple) -> Callable:
    """Return ``fn`` (a function of tensors running ATen ops) compiled by Inductor for inputs like
    ``args``: traced to an ATen graph with ``make_fx`` and handed to ``torch._inductor.compile``
    (no Dynamo frame and guards around each call, which cost more than a small region's work),
    compiling in this process (``compile_threads=1``: no worker pool for one region's kernels)."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    import torch._inductor

    # Parameters reach a forward region still requiring grad (grad mode is off there): detached
    # examples make Inductor compile the inference graph the region is.
    examples = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        gm = make_fx(fn)(*examples)
        return torch._inductor.compile(gm, examples, options={"compile_threads": 1})
