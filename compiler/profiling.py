"""Per-symbol profiling of compiled chains, and capture of fusion inputs.

With profiling on, a chain is compiled to two (or three) callables from the same in-memory trace:
the plain one (exactly what runs without profiling) and instrumented variants whose generated code
calls a :class:`ChainProfiler` around every top-level symbol (see ``passes/codegen.py``).
:class:`ProfiledChain` runs the capture variant on the first call (when capturing inputs), the plain
callable for the warm-up calls, the timing variant for the next K calls, then reports the aggregated
timings once through ``observer.runtime(graph, chain, "timings", data)``. The K calls after those run
the plain callable with only a clock around it (synchronized on CUDA): the chain's wall time per call,
reported as ``runtime(graph, chain, "walls", data)``, which the timed calls cannot give (their
instrumentation, and on CUDA the profiler's own sleeps, are in their wall time). The last warm-up
call is measured for memory (``runtime(graph, chain, "memory", data)``, see memory_measure.py). Then it hands the
plain callable back, so nothing is paid afterwards. With profiling off none of this exists.

Clocks: on CUDA the device time between two CUDA events around the symbol; before the start event
the stream is kept busy for a moment (``torch.cuda._sleep``) so the events bracket the kernels the
symbol launched and not the host's launch latency. Without CUDA: host time (``perf_counter_ns``),
labelled ``clock: "host"``.

Memory is bounded: at most ``steps`` samples per symbol, then profiling stops for that chain.
"""
from __future__ import annotations

import statistics
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from .ir import BoundSymbol, Trace, TensorProxy
from .values import torch_dtype

# GPU cycles the stream sleeps before each start event (~0.1 ms at 2 GHz): long enough for the host
# to enqueue the symbol's launches behind it, so the event pair times kernels, not launch latency.
SLEEP_CYCLES = 200_000


@dataclass
class ProfileSettings:
    """What to do at run time: time ``steps`` calls after ``warmup`` calls (``timing``), and/or
    capture each fusion's inputs (and the chain's) on its first call within ``capture_limit_bytes``
    for the whole run (``capture_limit_bytes`` None: no capture), and/or check numerics."""

    timing: bool = True
    warmup: int = 2
    steps: int = 5
    capture_limit_bytes: Optional[int] = None
    # run --check-numerics: the first ``check_steps`` calls check every fusion's outputs with
    # ``checker(symbol, inputs, outputs, parents) -> dict`` (see numerics_hooks); run --compare-eager: the
    # first ``compare_steps`` calls also run the ATen graph eagerly (applied by the backend).
    check_steps: int = 0
    checker: Optional[Callable] = field(default=None, repr=False, compare=False)
    compare_steps: int = 0
    _captured_bytes: int = field(default=0, repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)

    def reserve(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` of the capture budget; return False when it does not fit."""
        with self._lock:
            if self.capture_limit_bytes is None or self._captured_bytes + nbytes > self.capture_limit_bytes:
                return False
            self._captured_bytes += nbytes
            return True


@dataclass(frozen=True)
class TimedSymbol:
    """One top-level symbol of a chain as profiling sees it (index = its call order)."""

    index: int
    name: str  # the kernel name for fusions, the symbol name (prims.matmul ...) for ops
    uid: str
    executor: str
    kind: str  # "fusion" or "op"
    bytes_read: int
    bytes_written: int
    input_names: tuple[str, ...] = ()


def proxy_bytes(p: TensorProxy) -> int:
    """Return numel * itemsize of a proxy (0 for an unknown dtype)."""
    try:
        return p.numel * torch_dtype(p.dtype).itemsize
    except ValueError:
        return 0


def timed_symbols(trace: Trace) -> list[TimedSymbol]:
    """Return the symbols of ``trace`` that the generated code calls, in order, with their bytes
    read (distinct input proxies) and written (output proxies)."""
    out = []
    for b in trace.symbols:
        if b.sym == "del":
            continue
        ins = {p.name: p for p in b.flat_inputs()}
        outs = {p.name: p for p in b.flat_outputs()}
        kind = "fusion" if b.fusion else "op"
        out.append(TimedSymbol(len(out), b.sym, b.uid, b.executor or "", kind,
                               sum(proxy_bytes(p) for p in ins.values()),
                               sum(proxy_bytes(p) for p in outs.values()),
                               tuple(ins)))
    return out


_live: "weakref.WeakSet[ChainProfiler]" = weakref.WeakSet()


def flush_all() -> int:
    """Report the partial timings of every chain still being profiled (the script ended before its
    K profiled calls); return how many chains reported."""
    n = 0
    for prof in list(_live):
        if prof.flush():
            n += 1
    return n


def _stats(samples: Sequence[float]) -> dict:
    if not samples:
        return {"median_us": 0.0, "min_us": 0.0, "max_us": 0.0, "total_us": 0.0}
    return {"median_us": float(statistics.median(samples)), "min_us": float(min(samples)),
            "max_us": float(max(samples)), "total_us": float(sum(samples))}


class ChainProfiler:
    """Collects per-symbol samples for one compiled chain; the instrumented code calls
    :meth:`begin_call`, :meth:`start`, :meth:`stop`, :meth:`end_call` and :meth:`capture`."""

    def __init__(self, graph: int, chain: str, symbols: Sequence[TimedSymbol], settings: ProfileSettings,
                 observer, device: str = "cpu"):
        self.graph, self.chain, self.symbols = graph, chain, list(symbols)
        self.settings, self.observer = settings, observer
        self.device = device
        self.clock = "device" if device.startswith("cuda") and torch.cuda.is_available() else "host"
        self.samples: list[list[float]] = [[] for _ in self.symbols]
        self.starts: list[list[float]] = [[] for _ in self.symbols]
        self.call_starts: list[float] = []
        self.walls: list[float] = []  # µs: wall time of each untimed call after the timed ones
        self.calls = 0
        self.reported = False
        self.walls_reported = False
        self.memory_reported = False
        self._pending: list = []
        self._t0 = 0
        self._first_t0: Optional[int] = None
        _live.add(self)

    # ------------------------------------------------------------ called by the instrumented code
    def begin_call(self) -> None:
        """A profiled call starts."""
        self._pending = []
        self._t0 = time.perf_counter_ns()
        if self._first_t0 is None:
            self._first_t0 = self._t0

    def start(self, i: int):
        """Symbol ``i`` is about to run; return the token :meth:`stop` takes."""
        if self.clock == "device":
            torch.cuda._sleep(SLEEP_CYCLES)
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter_ns()

    def stop(self, i: int, token) -> None:
        """Symbol ``i`` returned."""
        if self.clock == "device":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._pending.append((i, token, ev))
        else:
            self._pending.append((i, token, time.perf_counter_ns()))

    def end_call(self) -> None:
        """A profiled call ended: turn its pending marks into samples (bounded by ``steps``)."""
        if self.calls >= self.settings.steps:
            return
        if self.clock == "device":
            torch.cuda.synchronize()
            offset = 0.0
            for i, a, b in self._pending:
                dur = a.elapsed_time(b) * 1e3
                # Device offsets are laid end to end: the sleeps between symbols are ours, not the program's.
                self.samples[i].append(dur)
                self.starts[i].append(offset)
                offset += dur
        else:
            for i, a, b in self._pending:
                self.samples[i].append((b - a) / 1e3)
                self.starts[i].append((a - self._t0) / 1e3)
        self._pending = []
        self.call_starts.append((self._t0 - (self._first_t0 or self._t0)) / 1e3)
        self.calls += 1

    def wall_call(self, fn: Callable, args):
        """Return ``fn(args)`` (the chain's plain callable) and keep its wall time (bounded by
        ``steps``); on CUDA the device is synchronized before and after, so the time is the
        call's and its kernels', not only their launches'."""
        sync = self.clock == "device"  # a CUDA chain on a machine with CUDA
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        out = fn(args)
        if sync:
            torch.cuda.synchronize()
        if len(self.walls) < self.settings.steps:
            self.walls.append((time.perf_counter_ns() - t0) / 1e3)
        return out

    def measure_memory(self, fn: Callable, args, names: Sequence[str]):
        """Return ``fn(args)`` and report, once, what the call really kept live
        (``runtime(..., "memory", {device, method, baseline_bytes, peak_bytes})``, see memory_measure)."""
        from .memory_measure import input_storage_bytes, measured_call
        self.memory_reported = True
        if not self.device.startswith("cuda") and torch.autograd.profiler._is_profiler_enabled:
            return fn(args)  # a profiler runs already (the step share's, the script's): one at a time
        baseline = input_storage_bytes(names, args, self.chain)
        out, data = measured_call(fn, args, self.device)
        try:
            self.observer.runtime(self.graph, self.chain, "memory",
                                  {"device": self.device, "baseline_bytes": baseline, **data})
        except Exception:  # a failing observer must not stop training
            pass
        return out

    def capture(self, i: int, tensors: Sequence) -> None:
        """Fusion ``i`` is about to run on ``tensors``: copy them to the CPU within the run's capture
        budget and report them (``runtime(..., "inputs", ...)``), or report why they were skipped."""
        s = self.symbols[i]
        self._capture("inputs", s.name, s.uid, s.input_names, tensors, None)

    def capture_chain_inputs(self, names: Sequence[str], tensors: Sequence) -> None:
        """The chain is about to run on ``tensors`` (its inputs ``names``): capture them like a
        fusion's, under the name ``<chain>_inputs`` (what ``thundervis bisect --inputs captured``
        reads)."""
        self._capture("chain_inputs", f"{self.chain}_inputs", None, names, tensors,
                      "the chain's inputs would exceed the capture limit")

    def _capture(self, what: str, kernel: str, uid, names: Sequence[str], tensors: Sequence, too_big) -> None:
        """Copy ``tensors`` (named ``names``) to the CPU within the capture budget and report them as
        ``runtime(graph, chain, what, ...)`` under ``kernel``; or report why not (``too_big``: the
        reason when over budget, None: say by how much)."""
        ts = [t for t in tensors if isinstance(t, torch.Tensor)]
        nbytes = sum(t.numel() * t.element_size() for t in ts)
        data = {"kernel": kernel, "uid": uid, "names": list(names), "bytes": nbytes, "tensors": None, "skipped": None}
        if len(ts) != len(tensors) or len(ts) != len(names):
            data["skipped"] = "inputs are not all tensors"
        elif not self.settings.reserve(nbytes):
            limit = (self.settings.capture_limit_bytes or 0) / 2**20
            data["skipped"] = too_big or f"{nbytes / 2**20:.2f} MB would exceed the capture limit of {limit:g} MB"
        else:
            data["tensors"] = [t.detach().to("cpu", copy=True).contiguous() for t in ts]
        try:
            self.observer.runtime(self.graph, self.chain, what, data)
        except Exception:  # capture is best effort; never break the user's run
            pass

    # ------------------------------------------------------------------------------- reporting
    def summary(self, partial: bool = False) -> dict:
        """Return the aggregated timings of the calls profiled so far (JSON-able)."""
        per_call = [0.0] * self.calls
        for samples in self.samples:
            for c, v in enumerate(samples[: self.calls]):
                per_call[c] += v
        chain_total = sum(per_call)
        syms = []
        for s, samples, starts in zip(self.symbols, self.samples, self.starts):
            st = _stats(samples)
            nbytes = s.bytes_read + s.bytes_written
            syms.append({
                "index": s.index, "name": s.name, "uid": s.uid, "executor": s.executor, "kind": s.kind,
                "calls": len(samples), **st,
                "share": st["total_us"] / chain_total if chain_total > 0 else 0.0,
                "bytes_read": s.bytes_read, "bytes_written": s.bytes_written, "bytes": nbytes,
                "gbps": nbytes / st["median_us"] / 1e3 if st["median_us"] > 0 else 0.0,
                "samples_us": [float(v) for v in samples], "starts_us": [float(v) for v in starts],
            })
        return {"clock": self.clock, "device": self.device, "warmup": self.settings.warmup, "steps": self.settings.steps,
                "calls": self.calls, "partial": partial, "step": _stats(per_call),
                "call_starts_us": list(self.call_starts), "symbols": syms}

    def report(self, partial: bool = False) -> bool:
        """Send the summary to the observer once; return True when it was sent now."""
        if self.reported or self.calls == 0:
            return False
        self.reported = True
        try:
            self.observer.runtime(self.graph, self.chain, "timings", self.summary(partial))
        except Exception:  # a failing observer must not stop training
            pass
        return True

    def report_walls(self, partial: bool = False) -> bool:
        """Send the untimed calls' wall times (``runtime(..., "walls", data)``: ``clock`` and
        ``device`` of the timings they go with, ``calls``, ``walls_us``, ``partial``) once, after
        the timings; return True when they were sent now."""
        if self.walls_reported or not self.reported or not self.walls:
            return False
        self.walls_reported = True
        _live.discard(self)
        try:
            self.observer.runtime(self.graph, self.chain, "walls", {
                "clock": self.clock, "device": self.device, "calls": len(self.walls),
                "walls_us": [float(v) for v in self.walls], "partial": partial})
        except Exception:  # a failing observer must not stop training
            pass
        return True

    def flush(self) -> bool:
        """Report what was measured and not reported yet (the run is ending): partial timings, then
        the wall times of the untimed calls made so far; return True when anything was sent."""
        sent = self.report(partial=True)
        return self.report_walls(partial=True) or sent


class ProfiledChain:
    """The boxed callable handed to Dynamo when profiling or capture is on.

    Call 0 runs ``captured`` (when given); calls before ``warmup`` run ``plain``; the next ``steps``
    calls run ``timed``, then the profiler reports the timings; the next ``steps`` calls run
    ``plain`` under a clock (:meth:`ChainProfiler.wall_call`), then it reports their wall times,
    ``on_done`` is called (the backend swaps in ``plain`` for good) and every later call runs
    ``plain``.
    """

    _boxed_call = True

    def __init__(self, plain: Callable, profiler: ChainProfiler, timed: Optional[Callable] = None,
                 captured: Optional[Callable] = None, checked: Optional[Callable] = None,
                 checked_first: Optional[Callable] = None, input_names: Sequence[str] = ()):
        self.plain, self.timed, self.captured, self.profiler = plain, timed, captured, profiler
        # --check-numerics: calls 0..check_steps-1 run ``checked`` (``checked_first``, which also
        # captures, for call 0); the timing schedule starts after them.
        self.checked, self.checked_first = checked, checked_first
        self.check_steps = profiler.settings.check_steps if checked is not None else 0
        self.input_names = list(input_names)
        self.calls = 0
        self.done = False
        self.on_done: Optional[Callable[[], None]] = None

    def __call__(self, args):
        n = self.calls
        self.calls += 1
        if self.done:
            return self.plain(args)
        if n == 0 and self.captured is not None:
            # The chain's inputs are captured after the call, so the fusions' come first in the budget.
            inputs = list(args)
            out = self._call(n, args)
            self.profiler.capture_chain_inputs(self.input_names, inputs)
            return out
        return self._call(n, args)

    def _call(self, n: int, args):
        if n < self.check_steps:
            out = (self.checked_first if n == 0 and self.checked_first is not None else self.checked)(args)
            if n == self.check_steps - 1 and self.timed is None:
                self._finish()
            return out
        n -= self.check_steps
        if n == 0 and self.captured is not None and self.check_steps == 0:
            out = self.captured(args)
            if self.timed is None:
                self._finish()
            return out
        warmup = self.profiler.settings.warmup
        profiler, steps = self.profiler, self.profiler.settings.steps
        # What the call keeps live is measured once, on the last warm-up call (the first timed one
        # without warm-up): the profiler it takes must not sit in a timed or wall-clocked call.
        measure = self.timed is not None and not profiler.memory_reported and n >= warmup - 1
        if self.timed is None or n < warmup:
            return profiler.measure_memory(self.plain, args, self.input_names) if measure else self.plain(args)
        if not profiler.reported and profiler.calls < steps:
            out = profiler.measure_memory(self.timed, args, self.input_names) if measure else self.timed(args)
            if profiler.calls >= steps:
                profiler.report()
            return out
        out = profiler.wall_call(self.plain, args)
        if len(profiler.walls) >= steps:
            profiler.report_walls()
            self._finish()
        return out

    def _finish(self) -> None:
        self.done = True
        if self.on_done is not None:
            self.on_done()


def build_profiled_chain(trace: Trace, executors: Sequence, settings: ProfileSettings, observer,
                         plain: Callable, plan: tuple) -> Callable:
    """Return a :class:`ProfiledChain` for the codegen'd ``trace`` whose plain callable is ``plain``
    (``plain`` itself when the settings ask for nothing at run time);
    ``plan`` is codegen's (namespace, calls), shared so kernels are built once."""
    from .passes.codegen import instrumented_callable
    symbols = timed_symbols(trace)
    device = trace.inputs[0].device if trace.inputs else "cpu"
    profiler = ChainProfiler(trace.graph, trace.chain, symbols, settings, observer, device)
    timed = instrumented_callable(trace, plan, profiler, timing=True) if settings.timing else None
    captured = checked = checked_first = None
    fusions = {s.index for s in symbols if s.kind == "fusion"}
    if settings.capture_limit_bytes is not None:
        captured = instrumented_callable(trace, plan, profiler, capture=fusions)
    if settings.check_steps > 0 and settings.checker is not None:
        from .numerics_hooks import checked_plan, flushed_after, reporter
        from .passes.claim import DECOMPOSED
        checked_ns, flush = checked_plan(plan, settings.checker, reporter(observer, trace.graph, trace.chain),
                                         trace.meta.get(DECOMPOSED))
        checked = flushed_after(instrumented_callable(trace, checked_ns, profiler), flush)
        if captured is not None:
            checked_first = flushed_after(instrumented_callable(trace, checked_ns, profiler, capture=fusions), flush)
    if timed is None and captured is None and checked is None:
        return plain  # nothing to do at run time (--compare-eager alone is the backend's)
    return ProfiledChain(plain, profiler, timed, captured, checked, checked_first,
                         [p.name for p in trace.inputs])
