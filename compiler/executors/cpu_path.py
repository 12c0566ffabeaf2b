"""The fast CPU path of a fusion region: what runs a Triton fusion where there is no CUDA.

Triton's interpreter runs a kernel at a hundred times eager's cost, so without CUDA the default
executors still plan and generate every Triton kernel (it is recorded, and compiled ahead of time
for a ``--target``), but the region runs through one of two CPU paths:

- ``torch``: the region's ops run one by one as their exact ATen overloads (the torch executor's
  bindings), from a small Python function generated from the in-memory region;
- ``inductor``: the region compiled by Inductor's C++ backend (:mod:`.inductor_executor`).

The first call times the torch path on the real inputs. A region whose torch path takes at least
:func:`inductor_threshold_us` (smaller ones cannot win back a compiled call's fixed cost) is tried
with Inductor once it proved hot (:func:`inductor_after_calls`: a short run never pays for a
compile); that call compiles it and times Inductor, and the faster path stays for good. Each step of the decision goes to the observer as a ``kernel_path`` runtime event
(``device``, ``via``, ``planned``, ``torch_us``, ``inductor_us``, ``why``), so every view can say
what ran where. An explicit ``--executors triton`` keeps Triton's interpreter (numerics checks); see
:class:`~.triton_executor.TritonExecutor`.
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from typing import Callable, Optional

from ..ir import BoundSymbol, TensorProxy
from ..observer import runtime_reporter
from ..printer import call_text
from ..values import is_valid_name

# The run paths a kernel record names (``ran_on`` in the recording): device + how.
VIA_TRITON = "triton"                 # a compiled Triton kernel on the GPU
VIA_INTERPRETER = "triton-interpreter"
VIA_TORCH = "torch"
VIA_INDUCTOR = "inductor"

_DEFAULT_INDUCTOR_MIN_US = 100.0
_WARMUP = 2
_TIMING_REPS = 5


def path_event(fusion: BoundSymbol, device: str, via: str, *, planned: bool = False, why: str = "",
               torch_us: Optional[float] = None, inductor_us: Optional[float] = None) -> dict:
    """Return the data of a ``kernel_path`` runtime event: kernel ``fusion`` runs on ``device``
    (``cpu``, ``cuda``) via ``via`` (a ``VIA_*``); ``planned``: said at build time, before any call
    (a later event of the same kernel replaces it); the measured times of the CPU paths and why."""
    return {"kernel": fusion.sym, "uid": fusion.uid, "device": device, "via": via, "planned": planned,
            "torch_us": _round(torch_us), "inductor_us": _round(inductor_us), "why": why}


def report_path(fusion: BoundSymbol, device: str, via: str, **kw) -> None:
    """Report :func:`path_event` for the chain being compiled (a no-op outside compiling)."""
    runtime_reporter()("kernel_path", path_event(fusion, device, via, **kw))


def inductor_after_calls() -> int:
    """Return how many calls a region runs through torch before it is tried with Inductor
    (``$THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS``, default 20; at least 1)."""
    try:
        return max(1, int(os.environ.get("THUNDERVIS_CPU_INDUCTOR_AFTER_CALLS", "") or 20))
    except ValueError:
        return 20


def inductor_threshold_us() -> Optional[float]:
    """Return the torch-path time (µs per call) from which a region is also tried with Inductor
    (``$THUNDERVIS_CPU_INDUCTOR_MIN_US``; ``off`` never tries it; default 100 µs)."""
    text = os.environ.get("THUNDERVIS_CPU_INDUCTOR_MIN_US", "").strip().lower()
    if text in ("off", "never", "none"):
        return None
    try:
        return max(0.0, float(text)) if text else _DEFAULT_INDUCTOR_MIN_US
    except ValueError:
        return _DEFAULT_INDUCTOR_MIN_US


def region_steps(fusion: BoundSymbol, parents: Optional[dict] = None) -> list[BoundSymbol]:
    """Return the symbols the torch path calls for ``fusion``: its members, except that the prims
    of a decomposed ATen symbol (``parents``: {uid: symbol}, see ``claim.DECOMPOSED``) all of whose
    prims are in the region become that one ATen call again, which is what eager runs (a layer
    norm is one call, not twelve). A decomposed symbol whose call would read a value the region
    does not define (a layer norm backward's bias, which its prims never read, is no input of
    the region) keeps its members; the others are folded all the same."""
    members = list(fusion.subsymbols)
    if not parents:
        return members
    in_region = {s.uid for s in members}
    whole = {}  # uid -> the decomposed symbol, for each one whose prims are all in the region
    for s in members:
        parent = parents.get(s.origin[0]) if len(s.origin) == 1 else None
        if parent is not None and parent.uid not in whole and all(sub.uid in in_region for sub in parent.subsymbols):
            whole[parent.uid] = parent
    inputs = {p.name for p in fusion.args if isinstance(p, TensorProxy)}
    while whole:  # each round unfolds at least one symbol, so at most len(whole) rounds
        steps, placed = [], set()
        for s in members:
            parent = whole.get(s.origin[0]) if len(s.origin) == 1 else None
            if parent is None:
                steps.append(s)
            elif parent.uid not in placed:
                placed.add(parent.uid)
                steps.append(parent)
        defined, missing, reader = set(inputs), None, None
        for b in steps:
            missing = next((p.name for p in b.flat_inputs() if p.name not in defined), None)
            if missing is not None:
                reader = b
                break
            defined.update(p.name for p in b.flat_outputs())
        else:
            missing = next((p.name for p in fusion.outputs if p.name not in defined), None)
            if missing is None:
                return steps
        # Unfold the symbol that reads a value the region lacks, or the one whose prims define a
        # value the folded call does not (an intermediate the region returns or reads later on).
        culprit = reader.uid if reader is not None and reader.uid in whole else next(
            (uid for uid, parent in whole.items()
             if any(p.name == missing for sub in parent.subsymbols for p in sub.flat_outputs())), None)
        if culprit is None:
            return members  # the members themselves read it: the region as it is
        del whole[culprit]
    return members


def torch_region(fusion: BoundSymbol, parents: Optional[dict] = None) -> Callable:
    """Return ``fn(*inputs) -> tuple of outputs`` running the region with torch.

    The function is generated from the in-memory region (never from recorded text): one statement
    per step of :func:`region_steps` calling the torch executor's binding of its exact ATen
    overload, so a call costs what the same ops cost in eager mode plus one Python frame.
    """
    import torch

    from .torch_executor import TorchExecutor
    torch_ex = TorchExecutor()
    params = []
    for p in fusion.args:
        if not isinstance(p, TensorProxy) or not is_valid_name(p.name):
            raise ValueError(f"region {fusion.sym} has an input that is not a named tensor: {p!r}")
        params.append(p.name)
    namespace: dict = {"torch": torch}  # printed constants read torch.float32, torch.contiguous_format ...
    lines = [f"def _region({', '.join(params)}):"]
    for i, s in enumerate(region_steps(fusion, parents)):
        for p in s.flat_outputs():
            if not is_valid_name(p.name):
                raise ValueError(f"invalid proxy name {p.name!r} in region {fusion.sym}")
        namespace[f"_op{i}"] = torch_ex.callable_for(s)
        lines.append("  " + call_text(s, f"_op{i}"))
    outs = [p.name for p in fusion.outputs]
    lines.append(f"  return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<thundervis cpu region {fusion.sym}>", "exec")
    exec(code, namespace)  # source generated from the in-memory region only (validated names)
    fn = namespace["_region"]
    # Two region functions with equal keys make the same calls on their inputs (numerics check).
    fn.code_key = (source, tuple(namespace[f"_op{i}"] for i in range(len(lines) - 2)))
    return fn


def _time_us(fn: Callable, args: tuple) -> tuple[float, object]:
    """Return (the best µs of a few calls of ``fn(*args)`` after warm-up calls, the last result).
    The best, not the median: on a shared machine the other processes only ever add time."""
    for _ in range(_WARMUP):
        fn(*args)
    samples, out = [], None
    for _ in range(_TIMING_REPS):
        t0 = time.perf_counter()
        out = fn(*args)
        samples.append((time.perf_counter() - t0) * 1e6)
    return min(samples), out


class CpuRegion:
    """A fusion region's CPU launcher (see the module doc). Its first call measures the torch path
    and, when the region is big enough and has been called :func:`inductor_after_calls` times,
    compiles it with Inductor, measures that on the real inputs and keeps the faster path for good.
    ``via`` is the path in use (None before the first call); ``torch_us`` / ``inductor_us`` the
    measured best times (None: not measured); ``why`` the reason of the choice."""

    def __init__(self, fusion: BoundSymbol, inductor: bool = True, parents: Optional[dict] = None):
        self.name = fusion.sym
        self.uid = fusion.uid
        self.torch_fn = torch_region(fusion, parents)
        self._inductor = inductor
        self.fn: Optional[Callable] = None
        self.via: Optional[str] = None
        self.torch_us: Optional[float] = None
        self.inductor_us: Optional[float] = None
        self.why = ""
        self._hot_in = 0  # calls left before a region worth trying is compiled by Inductor
        self._pending = False  # True while Inductor may still replace torch (the slow call path)
        self._witness: Optional[list] = None  # during run_witnessed: (args, outputs) of each torch_fn call
        self._report = runtime_reporter()

    def __call__(self, *args):
        if not self._pending and self._witness is None:
            fn = self.fn
            if fn is not None:
                return fn(*args)
        return self._slow_call(args)

    def _slow_call(self, args: tuple):
        """A call that is not the plain one: the first, one while Inductor may still take the
        region, or one :meth:`run_witnessed` watches."""
        if self.fn is None:
            return self._first_call(args)
        if self._pending:
            self._hot_in -= 1
            if self._hot_in <= 0:
                return self._compiled(args, compile_in_fresh_thread(self.torch_fn, args))
        return self._run(self.fn, args)

    def _run(self, fn: Callable, args: tuple):
        """``fn(*args)``, noted for :meth:`run_witnessed` when ``fn`` is the torch path."""
        out = fn(*args)
        if self._witness is not None and fn is self.torch_fn:
            self._witness.append((args, out))
        return out

    def run_witnessed(self, *args) -> tuple:
        """Call the region as ``self(*args)`` does and return ``(outputs, function)``: ``function``
        is :attr:`torch_fn` when ``outputs`` is the very object that function returned in this call
        for these very argument objects (the torch path ran: the region's exact ATen calls, which
        is what the numerics check runs as eager float32), else None (Inductor ran the region, or
        whatever stands between that function and the caller returned something else). The
        numerics check uses it so as not to run the same function on the same tensors twice."""
        witness = self._witness = []
        try:
            out = self(*args)
        finally:
            self._witness = None
        for seen, result in witness:
            if result is out and len(seen) == len(args) and all(a is b for a, b in zip(seen, args)):
                return out, self.torch_fn
        return out, None

    def _first_call(self, args: tuple):
        self.torch_us, out = _time_us(self.torch_fn, args)
        if self._witness is not None:
            self._witness.append((args, out))
        self.fn, self.via = self.torch_fn, VIA_TORCH
        threshold = inductor_threshold_us()
        if not self._inductor:
            self.why = "inductor is not available here"
        elif threshold is None:
            self.why = "inductor not tried (THUNDERVIS_CPU_INDUCTOR_MIN_US=off)"
        elif self.torch_us < threshold:
            self.why = f"inductor not tried: torch takes {self.torch_us:.0f} µs, below {threshold:.0f} µs"
        else:
            # Compiled only once the region proved hot: a short run never pays for a compile.
            self.why = (f"inductor to be tried after {inductor_after_calls()} calls "
                        f"(torch takes {self.torch_us:.0f} µs)")
            self._hot_in, self._pending = inductor_after_calls(), True
        self._say()
        return out

    def _compiled(self, args: tuple, job: dict):
        self._pending = False
        if "error" in job:
            e = job["error"]
            first = str(e).splitlines()[0][:160] if str(e) else ""
            self.why = f"inductor failed: {type(e).__name__}: {first}"
            self._say()
            return self._run(self.fn, args)
        compiled = job["fn"]
        try:
            self.inductor_us, ind_out = _time_us(compiled, args)
        except Exception as e:  # a compiled region that fails to run: torch keeps it
            self.why = f"inductor failed at run time: {type(e).__name__}: {str(e)[:160]}"
            self._say()
            return self._run(self.fn, args)
        if self.inductor_us < self.torch_us:
            self.fn, self.via = compiled, VIA_INDUCTOR
            self.why = (f"inductor faster ({self.inductor_us:.0f} µs vs torch {self.torch_us:.0f} µs; "
                        f"compiled in {job['seconds']:.1f} s)")
            self._say()
            return ind_out
        self.why = f"torch faster ({self.torch_us:.0f} µs vs inductor {self.inductor_us:.0f} µs)"
        self._say()
        return self._run(self.fn, args)

    def _say(self) -> None:
        self._report("kernel_path", {"kernel": self.name, "uid": self.uid, "device": "cpu", "via": self.via,
                                     "planned": False, "torch_us": _round(self.torch_us),
                                     "inductor_us": _round(self.inductor_us), "why": self.why})


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


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)
