"""Ctrl-C and SIGTERM while ``thundervis run`` runs a script: never lost, never raised where it
would abort the process, never cutting a recording's start short.

:class:`HeldSignals` holds SIGINT and SIGTERM while the recording is created. From then on
:class:`RedeliveredInterrupts` decides where a Ctrl-C may become a KeyboardInterrupt:
:func:`unsafe_place` names the places Python or torch would drop it or abort on it, and there the
Ctrl-C is sent again a moment later, as a real signal to the main thread (so a wait the main thread
is blocked in wakes up for it).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Optional


class Terminated(BaseException):
    """SIGTERM arrived: stop the script like Ctrl-C does (the run's end is written, exit 143)."""


class HeldSignals:
    """From creation until :meth:`release`, SIGINT and SIGTERM (main thread only) are remembered
    instead of acting; :meth:`raise_pending` then raises the first one as KeyboardInterrupt or
    :class:`Terminated`. Used where an interruption would leave a half-written recording."""

    def __init__(self, in_main: bool):
        self._pending: Optional[int] = None
        self._saved: dict = {}
        if in_main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._hold)

    def _hold(self, signum, frame) -> None:
        if self._pending is None:
            self._pending = signum

    def release(self) -> None:
        """Give the signals their previous handlers back."""
        saved, self._saved = self._saved, {}
        for sig, handler in saved.items():
            signal.signal(sig, handler)

    def raise_pending(self) -> None:
        """Raise the signal that arrived while held (KeyboardInterrupt for SIGINT)."""
        if self._pending == signal.SIGINT:
            raise KeyboardInterrupt
        if self._pending == signal.SIGTERM:
            raise Terminated()


# What :func:`unsafe_place` returns: where a KeyboardInterrupt raised would be cleared by torch
# (resent for as long as it takes: a guard is quick) ...
GUARD = "a TorchDynamo guard"
# ... or could reach C++ that cannot pass it on (resent for at most DEFER_LIMIT_S).
DISPATCH = "torch's dispatcher"

# Where torch's dispatcher runs Python while an op executes (FakeTensorMode while Dynamo traces,
# __torch_dispatch__ rules, Python meta kernels, decompositions): a KeyboardInterrupt raised there
# unwinds through C++ that may not pass it on (std::terminate, seen in torch/_library).
_DISPATCH_SIDE = ("_library/", "_subclasses/", "_decomp/", "_refs/", "_prims/", "_prims_common/",
                  "utils/_python_dispatch.py", "_ops.py", "_meta_registrations.py",
                  "fx/experimental/proxy_tensor.py", "fx/experimental/symbolic_shapes.py")
# Dynamo's callbacks, called by its C frame hook as any Python function starts (one the dispatcher
# calls too): a KeyboardInterrupt raised in them leaves through that function's caller (seen
# aborting from _callback_from_stance under F.softmax on fake tensors). Only where the signal
# lands: every compiled call runs under eval_frame.py's wrappers.
_HOOK_SIDE = ("_dynamo/eval_frame.py", "_dynamo/convert_frame.py")
# Frames looked at below the one a signal lands in: Dynamo's guard functions are shallow, the
# dispatcher's Python calls pytree, context managers and the standard library a few dozen deep.
_GUARD_DEPTH, _DISPATCH_DEPTH = 12, 48
# How long a Ctrl-C may be held off the dispatcher's Python before it is raised wherever it lands
# (over 200 Ctrl-Cs in the first compile, the longest wait was 0.74 s).
DEFER_LIMIT_S = 2.0
_RESEND_AFTER_S = 0.02
_now = time.monotonic  # the clock of that wait (tests set it)


def unsafe_place(frame) -> Optional[str]:
    """Return where a KeyboardInterrupt raised in ``frame`` (where a signal handler was called)
    would be lost or abort the process: :data:`GUARD` when it or one of the frames below it runs a
    TorchDynamo guard (its generated ``guard`` function or ``torch/_dynamo/guards.py``: torch
    clears the exception as a failed guard); :data:`DISPATCH` when it or one of the frames below
    it runs the Python torch's dispatcher calls into while an op executes (what that Python calls,
    pytree, context managers, the standard library, runs inside the same C++ call), or when
    ``frame`` itself is a Dynamo callback; None anywhere else."""
    from thundervis.compiler.source import TORCH_DIR
    place, depth, f = None, 0, frame
    # Once the dispatcher's Python is found, only a guard deeper down (it takes precedence) is left.
    while f is not None and depth < (_GUARD_DEPTH if place else _DISPATCH_DEPTH):
        code = f.f_code
        path = code.co_filename
        if depth < _GUARD_DEPTH and ((code.co_name == "guard" and path == "<string>")
                                     or path.replace(os.sep, "/").endswith("torch/_dynamo/guards.py")):
            return GUARD
        inside = path[len(TORCH_DIR):].replace(os.sep, "/") if path.startswith(TORCH_DIR) else ""
        if place is None and (inside.startswith(_DISPATCH_SIDE) or (depth == 0 and inside.startswith(_HOOK_SIDE))):
            place = DISPATCH
        f, depth = f.f_back, depth + 1
    return place


class RedeliveredInterrupts:
    """While installed (from creation until :meth:`close`), a Ctrl-C is never lost where Python or
    torch would drop its KeyboardInterrupt, leaving the script training on (CI saw a run ignore a
    Ctrl-C for minutes), nor raised where it would abort the process:

    - in a weakref callback or a ``__del__`` (torch frees tensors through both, constantly while it
      compiles) Python only prints "Exception ignored in ..."; such drops reach
      ``sys.unraisablehook``, and this one sends the Ctrl-C again instead of printing;
    - in a TorchDynamo guard function (run at every compiled call and profiled at compile time),
      an exception is taken as "guard failed" and cleared; the SIGINT handler installed here does
      not raise there but sends the Ctrl-C again (:data:`GUARD`);
    - in the Python torch's dispatcher calls back into while an op runs (fake tensors while Dynamo
      traces, ``__torch_dispatch__`` rules, Python meta kernels and decompositions) or in Dynamo's
      frame-hook callbacks (:data:`DISPATCH`), a KeyboardInterrupt can reach C++ that cannot pass
      it on: the process aborted ("terminate called after throwing an instance of
      'pybind11::error_already_set'" or "'python_error'", exit -6) in 3 of 200 Ctrl-Cs sent in a
      run's first 1.6 s. There too the handler sends it again, for at most :data:`DEFER_LIMIT_S`
      (then it raises where it lands, as Python would), so it lands in Dynamo's tracer, the
      compiler or the script instead (0 aborts in 200).

    Sent again means a real SIGINT to the main thread from another thread a moment later
    (:meth:`_send_again`): a wait the main thread is blocked in by then (a lock, a sleep, a
    DataLoader's queue) is woken for it, which Python's ``interrupt_main`` would not do. A
    KeyboardInterrupt the user's code catches is not a drop and is left alone. Only installed over
    Python's default SIGINT handler."""

    def __init__(self):
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._hook
        self._previous_handler = None
        self._deferred_since: Optional[float] = None  # when a Ctrl-C was first held off the dispatcher's Python
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)

    @staticmethod
    def _send_again() -> None:
        # From another thread, a moment later: sent from here (or while this thread still waits
        # for that one to start), the handler would run at once, where the interrupt is dropped
        # again. Sent once SIGINT is ignored (the run's end being written), it does nothing.
        later = threading.Timer(_RESEND_AFTER_S, _signal_main_thread)
        later.daemon, later.name = True, "thundervis-ctrl-c"
        later.start()

    def _on_sigint(self, signum, frame) -> None:
        place = unsafe_place(frame)
        if place == GUARD:
            self._send_again()
            return
        if place == DISPATCH:
            now = _now()
            if self._deferred_since is None:
                self._deferred_since = now
            if now - self._deferred_since < DEFER_LIMIT_S:
                self._send_again()
                return
        self._deferred_since = None
        raise KeyboardInterrupt

    def _hook(self, unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            self._send_again()
            return
        self._previous_hook(unraisable)

    def close(self, handler):
        """Give ``sys.unraisablehook`` its previous value back (unless something replaced ours);
        return the SIGINT handler to restore in place of ``handler`` (the one in force until the
        run's end: ours gives way to the one it replaced, a handler the script set is kept)."""
        if sys.unraisablehook == self._hook:
            sys.unraisablehook = self._previous_hook
        if self._previous_handler is not None and handler == self._on_sigint:
            return self._previous_handler
        return handler


def _signal_main_thread() -> None:
    """Send SIGINT to the main thread: a real signal, so a system call it is blocked in returns
    and Python runs the handler (``interrupt_main`` only sets the flag a running thread checks);
    ``interrupt_main`` where there is no ``pthread_kill`` (Windows). Nothing when SIGINT is ignored
    (the run's end being written) or left to the system, as ``interrupt_main`` does."""
    if not callable(signal.getsignal(signal.SIGINT)):  # ignored or default: as interrupt_main, nothing
        return
    main = threading.main_thread()
    if hasattr(signal, "pthread_kill") and main.ident is not None and main.is_alive():
        try:
            signal.pthread_kill(main.ident, signal.SIGINT)
            return
        except (OSError, ValueError):  # the thread is gone: nothing left to interrupt
            return
    import _thread
    _thread.interrupt_main(signal.SIGINT)
