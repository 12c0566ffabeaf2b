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
compile). Inductor compiles it in a worker process (:mod:`.cpu_builds`: AOTInductor, into a plain
shared library this process loads without importing Inductor), never on the training thread: the
region runs through torch meanwhile, then calls alternate between both paths, timed (one
``perf_counter`` pair per call: the timing adds nothing a step can feel), and the lower median
stays for good. Each step of the decision goes to the observer as a
``kernel_path`` runtime event (``device``, ``via``, ``planned``, ``torch_us``, ``inductor_us``,
``why``, the timings in ``samples_us`` and the worker's ``build_s``), so every view can say what
ran where; ``cpu_build`` events (``building``, ``built``, ``failed``) say what is compiling (with
the cores and training threads it shares, and the priority the worker got: builds take idle CPU
time only, so on a busy machine they wait rather than slow the steps).
An explicit ``--executors triton`` keeps Triton's interpreter (numerics checks); see
:class:`~.triton_executor.TritonExecutor`.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Optional

from ..ir import BoundSymbol, TensorProxy
from ..observer import runtime_reporter
from ..printer import call_text
from ..values import is_valid_name
# In-process compiles (tests, tools); the training path builds in a worker process (cpu_builds).
from .cpu_compile_thread import (COMPILE_THREAD, compile_in_fresh_thread, compile_region,  # noqa: F401
                                 unfinished_compiles, wait_for_compiles)

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
    """A fusion region's CPU launcher (see the module doc). Its first call measures the torch path;
    a region big enough and called :func:`inductor_after_calls` times is sent to the build worker
    (:mod:`.cpu_builds`) and keeps running through torch while Inductor compiles it off the
    training thread. Once the code is back, calls alternate between the two paths (each call runs
    one of them, timed) until each has :data:`_MEASURED_CALLS` timings, and the path with the lower
    median stays for good. ``via`` is the path in use (None before the first call); ``torch_us`` /
    ``inductor_us`` the medians (None: not measured); ``why`` the reason of the choice."""

    def __init__(self, fusion: BoundSymbol, inductor: bool = True, parents: Optional[dict] = None):
        self.name = fusion.sym
        self.uid = fusion.uid
        self._fusion, self._parents = fusion, parents
        self.torch_fn = torch_region(fusion, parents)
        self._inductor = inductor
        self.fn: Optional[Callable] = None
        self.via: Optional[str] = None
        self.torch_us: Optional[float] = None
        self.inductor_us: Optional[float] = None
        self.why = ""
        self._hot_in = 0  # calls left before a region worth trying is sent to the build worker
        self._pending = False  # True while Inductor may still replace torch (the slow call path)
        self._build = None  # the worker's cpu_builds.Build while it compiles
        self._candidate: Optional[Callable] = None  # Inductor's code while both paths are timed
        self._samples: dict = {VIA_TORCH: [], VIA_INDUCTOR: []}
        self._build_s: Optional[float] = None
        self._warmed = False  # Inductor's first call (a warm-up, not a sample) is done
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
            if self._candidate is not None:
                return self._measured_call(args)
            if self._build is None:
                self._hot_in -= 1
                if self._hot_in <= 0:
                    self._start_build(args)
            elif self._build.ready():
                self._take_build()
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
            from . import cpu_builds
            cpu_builds.warm_up()  # the worker's one-off costs, paid while the region proves hot
        self._say()
        return out

    def _start_build(self, args: tuple) -> None:
        """Send the region to the build worker; torch keeps running it meanwhile."""
        from . import cpu_builds
        try:
            request = cpu_builds.region_request(self._fusion, region_steps(self._fusion, self._parents), args)
        except Exception as e:  # a region the serialized format cannot carry keeps torch
            self._give_up(f"inductor not tried: the region cannot be sent to the build worker "
                          f"({type(e).__name__}: {str(e)[:120]})")
            return
        self._build = cpu_builds.submit(request)
        cores, threads = _cores_and_threads()
        # The worker takes only CPU time nobody else wants (its priority comes back with the
        # answer): with no core spare the build waits, and the steps keep their speed.
        self.why = (f"inductor compiling off the training thread on idle CPU time only ({cores} cores, "
                    f"{threads} training threads); torch runs the region meanwhile")
        self._report("cpu_build", {"kernel": self.name, "uid": self.uid, "state": "building",
                                   "cores": cores, "training_threads": threads})
        self._say()

    def _take_build(self) -> None:
        """Take the worker's finished (and loaded) build and start timing both paths (or keep torch)."""
        build, self._build = self._build, None
        self._report("cpu_build", {"kernel": self.name, "uid": self.uid,
                                   "state": "failed" if build.error else "built", "priority": build.priority,
                                   "build_s": _round(build.seconds)})
        if build.error:
            self._give_up(f"inductor failed: {build.error}")
            return
        self._build_s = build.seconds
        built, torch_fn = build.fn, self.torch_fn  # loaded by the build reader thread, not here
        accepts = getattr(built, "accepts", None)

        def candidate(*a):  # inputs unlike those it was built for (a new stride) run through torch
            return tuple(built(*a)) if accepts is None or accepts(a) else torch_fn(*a)
        self._candidate = candidate

    def _measured_call(self, args: tuple):
        """One call of the alternation: the path with fewer timings runs (Inductor first: its
        first call is a warm-up, not a sample)."""
        samples = self._samples
        use_inductor = len(samples[VIA_INDUCTOR]) <= len(samples[VIA_TORCH])
        fn = self._candidate if use_inductor else self.torch_fn
        t0 = time.perf_counter()
        try:
            out = self._run(fn, args)
        except Exception as e:  # a compiled region that fails to run: torch keeps it
            self._give_up(f"inductor failed at run time: {type(e).__name__}: {str(e)[:160]}")
            return self._run(self.fn, args)
        dt = (time.perf_counter() - t0) * 1e6
        if use_inductor and not self._warmed:
            self._warmed = True
        else:
            samples[VIA_INDUCTOR if use_inductor else VIA_TORCH].append(dt)
        if min(len(v) for v in samples.values()) >= _MEASURED_CALLS:
            self._decide()
        return out

    def _decide(self) -> None:
        self.torch_us = statistics.median(self._samples[VIA_TORCH])
        self.inductor_us = statistics.median(self._samples[VIA_INDUCTOR])
        built = f"compiled in {self._build_s:.1f} s off the training thread"
        if self.inductor_us < self.torch_us:
            self.fn, self.via = self._candidate, VIA_INDUCTOR
            self.why = (f"inductor faster (median {self.inductor_us:.0f} µs vs torch {self.torch_us:.0f} µs "
                        f"over {_MEASURED_CALLS} alternated calls each; {built})")
        else:
            self.why = (f"torch faster (median {self.torch_us:.0f} µs vs inductor {self.inductor_us:.0f} µs "
                        f"over {_MEASURED_CALLS} alternated calls each; {built})")
        self._pending, self._candidate = False, None
        self._say()

    def _give_up(self, why: str) -> None:
        self._pending, self._candidate, self._build = False, None, None
        self.why = why
        self._say()

    def _say(self) -> None:
        data = {"kernel": self.name, "uid": self.uid, "device": "cpu", "via": self.via, "planned": False,
                "torch_us": _round(self.torch_us), "inductor_us": _round(self.inductor_us), "why": self.why}
        if any(self._samples.values()):  # the timings behind the choice, in call order per path
            data["samples_us"] = {k: [_round(x) for x in v] for k, v in self._samples.items()}
        if self._build_s is not None:
            data["build_s"] = _round(self._build_s)
        self._report("kernel_path", data)


# Timed calls of each path before a region's choice (after Inductor's warm-up call).
_MEASURED_CALLS = 5


def _cores_and_threads() -> tuple[int, int]:
    """Return (the cores this process may run on, torch's intra-op threads)."""
    import torch
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores, torch.get_num_threads()


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)
