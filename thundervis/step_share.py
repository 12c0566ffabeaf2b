"""How much of a training step ran inside compiled chains, measured under ``thundervis run --profile``.

A ``step_share`` event holds it (``present.compiled_share`` words it). :class:`StepShareMeter`
hears every call of a compiled chain (:mod:`thundervis.compiler.chain_calls`) and keeps its
``perf_counter`` interval; a step's compiled time is the union of those intervals inside the step,
and everything else in the step (code Dynamo left to eager, the optimizer, the script's Python) is
outside.

Steps: from the end of one ``optimizer.step()`` to the end of the next (torch's global optimizer
step post-hook), which every ordinary training script has; a script that never steps an optimizer
(inference) is cut at each call of the first chain it ran. The time before the first boundary
(compiles) is never a step. Kernel profiling runs its instrumented calls first
(``ProfileSettings.warmup + 2 * steps`` calls of each chain, then a report), so the steps measured
are the ones after them (up to :data:`MEASURED_STEPS`); a shorter run measures the steps after the
profiled one and says so (``instrumented``). On CUDA the device is synchronized at each chain call
and boundary of those steps, so a chain's interval holds its kernels and not only their launches.

Ops: during one step (the second), ``torch.profiler`` records CPU ops with their Python frames.
The ATen ops outside any chain call ran eagerly, counted at the level autograd records them (the
level AOTAutograd's graphs hold: ``linear`` is view, t, addmm, view); they are grouped by the user frames
above them (backward ops by the forward op that made them, through autograd's sequence number), so
present can put them in the eager regions Dynamo reported. Compiled ops are counted statically by
present (each chain's ops times its calls in that step, ``chain_calls``).
"""
from __future__ import annotations

import functools
import os
import re
import threading
import time
from typing import Callable, Optional

from thundervis.compiler import chain_calls

MEASURED_STEPS = 20
_MAX_INTERVALS = 50_000
_MAX_BOUNDARIES = 200
_MAX_PLACES = 40
_RANGE = "thundervis.chain"
# Ranges whose ops belong to compiled code: our chain calls and AOTAutograd's runtime wrappers
# around them (not Dynamo's "Torch-Compiled Region": it also spans the eager code of a graph break).
_COMPILED = (_RANGE, "CompiledFunction", "CompiledFunctionBackward")
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
# Frames of these are never the user's: the profiler names files relative to sys.path entries.
_NOT_USER = ("torch/", "thundervis/", "<", "contextlib.py", "typing.py", "functools.py", "runpy.py")


class StepShareMeter:
    """Measures the compiled share of each step and the ops that ran eagerly in one step (see the
    module doc); :meth:`stop` returns the ``step_share`` event's data (None when no step ended)."""

    def __init__(self, skip_steps: int = 2):
        self._skip = max(int(skip_steps), 2)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._intervals: list = []
        self._opened: dict = {}  # thread id -> start of its outermost open chain call
        self._optimizer: list = []
        self._first_chain: Optional[tuple] = None
        self._first_calls: list = []
        self._mode: Optional[str] = None
        self._hook = None
        self._prof = None
        self._op_step: Optional[dict] = None
        self._op_calls: dict = {}
        self._profiling = False
        self._op_window: list = [None, None]  # the profiled step's begin and end (no analysis in it)
        self._cuda = False

    def start(self) -> "StepShareMeter":
        """Begin listening to chain calls and optimizer steps; return self."""
        import torch
        self._cuda = torch.cuda.is_available()
        chain_calls.add_listener(self)
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            self._hook = register_optimizer_step_post_hook(lambda *a, **k: self._boundary("optimizer"))
        except Exception:  # an older torch: steps are cut at the first chain's calls
            self._hook = None
        return self

    def _sync(self) -> None:
        if self._cuda:
            import torch
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()

    def _measuring(self) -> bool:
        """Whether the steps that may be measured are still running (the optimizer's when it has
        stepped: :meth:`stop` prefers them)."""
        return len(self._optimizer or self._first_calls) <= self._skip + MEASURED_STEPS + 1

    def _boundaries(self) -> list:
        return self._optimizer if self._mode != "first chain" else self._first_calls

    def chain_started(self, graph: int, chain: str) -> None:
        """A chain call begins: maybe a step boundary, then the start of a compiled interval."""
        key = (graph, chain)
        if self._first_chain is None and chain in ("forward", "inference"):
            self._first_chain = key
        if key == self._first_chain:
            if len(self._first_calls) < _MAX_BOUNDARIES:
                self._first_calls.append(time.perf_counter())
            if len(self._first_calls) == 2 and self._mode is None:
                self._mode = "optimizer.step" if self._optimizer else "first chain"
            if self._mode == "first chain":
                self._step_edge(len(self._first_calls) - 1)
        if self._profiling:
            self._op_calls[key] = self._op_calls.get(key, 0) + 1
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            if self._measuring():
                self._sync()
            self._opened[threading.get_ident()] = time.perf_counter()
        if self._profiling:
            import torch
            rf = torch.autograd.profiler.record_function(_RANGE)
            rf.__enter__()
            self._local.ranges = getattr(self._local, "ranges", []) + [rf]

    def chain_finished(self, graph: int, chain: str) -> None:
        """A chain call ends: the end of its compiled interval."""
        ranges = getattr(self._local, "ranges", None)
        if ranges:
            ranges.pop().__exit__(None, None, None)
        depth = max(getattr(self._local, "depth", 1) - 1, 0)
        self._local.depth = depth
        if depth == 0:
            measuring = self._measuring()
            if measuring:
                self._sync()
            began = self._opened.pop(threading.get_ident(), None)
            # past the measured steps no interval is needed (and none is kept)
            if began is not None and measuring and len(self._intervals) < _MAX_INTERVALS:
                with self._lock:
                    self._intervals.append((began, time.perf_counter()))

    def _boundary(self, kind: str) -> None:
        if len(self._optimizer) >= _MAX_BOUNDARIES:
            return
        if self._measuring():
            self._sync()
        self._optimizer.append(time.perf_counter())
        if self._mode == "optimizer.step" or (self._mode is None and len(self._first_calls) < 2):
            self._step_edge(len(self._optimizer) - 1)

    def _step_edge(self, index: int) -> None:
        """Boundary ``index`` passed: step ``index`` begins. Ops are recorded during step 1; the
        profiler's start and its analysis are charged to that step, which is not measured."""
        edges = self._boundaries()
        if index == 1 and self._prof is None:
            self._begin_ops()
            if 0 < len(edges) <= 2 and self._op_window[0] is not None:
                edges[-1] = self._op_window[0]  # the profiler's start belongs to the profiled step
        elif index == 2 and self._profiling:
            self._end_ops(index)
            if len(edges) == 3:
                edges[-1] = time.perf_counter()

    def _begin_ops(self) -> None:
        try:
            from torch.profiler import ProfilerActivity, profile
            self._prof = profile(activities=[ProfilerActivity.CPU], with_stack=True)
            self._prof.__enter__()
            self._profiling = True
            self._op_window[0] = time.perf_counter()
        except Exception:  # another profiler is running (the user's): no op counts
            self._prof, self._profiling = False, False

    def _end_ops(self, index: int) -> None:
        import torch
        self._profiling = False
        self._op_window[1] = time.perf_counter()
        if not torch.autograd.profiler._is_profiler_enabled:
            # a profiler started and stopped inside ours (the script's) ended ours with it: its
            # events are gone, and no count is better than a wrong one
            self._op_step = {"step": index - 1, "error": "another profiler ended the op count's"}
            self._op_step["chain_calls"] = []
            self._prof = False
            return
        try:
            self._prof.__exit__(None, None, None)
            self._op_step = {"step": index - 1, **eager_ops(self._prof.events())}
        except Exception as e:
            self._op_step = {"step": index - 1, "error": f"{type(e).__name__}: {e}"[:300]}
        self._op_step["chain_calls"] = [[g, c, n] for (g, c), n in sorted(self._op_calls.items())]
        self._prof = False

    def stop(self) -> Optional[dict]:
        """Stop listening; return the ``step_share`` event's data, or None when no step ended."""
        chain_calls.remove_listener(self)
        if self._hook is not None:
            self._hook.remove()
        if self._profiling:  # the run ended inside the op step: its ops are partial, not counted
            self._profiling = False
            try:
                self._prof.__exit__(None, None, None)
            except Exception:
                pass
        # decided again now: a script that accumulates gradients calls its first graph several
        # times before its first optimizer step, but its steps are still the optimizer's
        mode = "optimizer.step" if len(self._optimizer) >= 3 or (self._mode is None and len(self._optimizer) >= 2) \
            else "first chain"
        edges = self._optimizer if mode == "optimizer.step" else self._first_calls
        steps = [(b, e) for b, e in zip(edges, edges[1:])]
        if not steps:
            return None
        walls = [[round(e - b, 6), round(_covered(self._intervals, b, e), 6)] for b, e in steps]
        # a run too short to get past the instrumented calls measures the steps after the profiled one
        first = self._skip if len(walls) > self._skip else 2 if len(walls) > 2 else 0
        instrumented = first < self._skip
        window = tuple(self._op_window) if None not in self._op_window else None
        profiled = {i for i, (b, e) in enumerate(steps) if window and b < window[1] and e > window[0]}
        chosen = [(i, w) for i, w in enumerate(walls) if i >= first and i not in profiled][:MEASURED_STEPS]
        if not chosen:
            chosen = list(enumerate(walls))[:MEASURED_STEPS]
        if self._op_step is not None and window is not None:
            begin, end = window
            self._op_step["wall_s"] = round(end - begin, 6)
            self._op_step["compiled_s"] = round(_covered(self._intervals, begin, end), 6)
        return {"boundary": mode, "steps_seen": len(walls), "first_measured": chosen[0][0],
                "instrumented": instrumented, "measured": [w for _, w in chosen],
                "op_step": self._op_step}


def _covered(intervals: list, begin: float, end: float) -> float:
    """Return the seconds of [begin, end] inside the union of ``intervals``."""
    total, reach = 0.0, begin
    for b, e in sorted(intervals):
        b, e = max(b, reach), min(e, end)
        if e > b:
            total += e - b
            reach = e
    return total


def eager_ops(events) -> dict:
    """Return what ran outside compiled chains among ``events`` (a profiler's ``events()``):
    ``eager_ops`` (ATen ops at the level autograd records them, see :func:`_count_op`),
    ``eager_us`` (the outermost ops' time, compiled ranges below them taken out) and
    ``places`` (per group of user frames: ops, µs, the frames innermost first)."""
    inside = {}

    def in_chain(e) -> bool:
        if id(e) in inside:
            return inside[id(e)]
        p, seen = e, []
        result = False
        while p is not None:
            if id(p) in inside:
                result = inside[id(p)]
                break
            if p.name in _COMPILED:
                result = True
                break
            seen.append(id(p))
            p = p.cpu_parent
        for i in seen:
            inside[i] = result
        return result

    deduct: dict = {}  # op id -> time of the compiled ranges below it (a compiled backward's node)
    for e in events:
        if e.name in _COMPILED and (e.cpu_parent is None or not in_chain(e.cpu_parent)):
            p = e.cpu_parent
            while p is not None:
                deduct[id(p)] = deduct.get(id(p), 0.0) + float(e.time_range.elapsed_us())
                p = p.cpu_parent
    fwd_place: dict = {}  # autograd sequence number -> the frames of the forward op that made it
    places: dict = {}
    ops = 0
    total_us = 0.0
    for e in events:
        if not e.name.startswith(("aten::", "autograd::engine::evaluate_function")) or in_chain(e):
            continue
        if _unit(e) is not e or "AccumulateGrad" in e.name:
            continue  # AccumulateGrad: autograd storing a leaf's .grad, no code of the script's
        backward = e.name.startswith("autograd::")
        seqs: list = []
        if backward:
            # a backward node's Python frames are the script's backward() call: its place is the
            # forward op's, found by autograd's sequence number
            frames, n = fwd_place.get(e.sequence_nr, ()), _count_below(e)
        else:
            frames, n = tuple(_user_frames(e)), _count_op(e, seqs)
            for seq in seqs:
                fwd_place.setdefault(seq, frames)
        slot = places.setdefault(frames, [0, 0.0])
        us = max(0.0, float(e.time_range.elapsed_us()) - deduct.get(id(e), 0.0))
        ops += n
        total_us += us
        slot[0] += n
        slot[1] += us
    ranked = sorted(places.items(), key=lambda kv: -kv[1][1])[:_MAX_PLACES]
    return {"eager_ops": ops, "eager_us": round(total_us, 1),
            "places": [{"frames": [list(f) for f in k], "ops": v[0], "us": round(v[1], 1)} for k, v in ranked]}


def _count_op(e, seqs: list) -> int:
    """Return how many ops ``e`` (an ATen op) is at the level autograd records them (the level of
    AOTAutograd's graphs): its children that autograd saw when it has any, else itself; the
    sequence numbers met go to ``seqs``."""
    seq = getattr(e, "sequence_nr", -1)
    if seq >= 0:
        seqs.append(seq)
    recorded = [c for c in e.cpu_children if c.name.startswith("aten::") and getattr(c, "sequence_nr", -1) >= 0]
    return sum(_count_op(c, seqs) for c in recorded) if recorded else 1


def _count_below(node) -> int:
    """Return the outermost ATen ops under an autograd node (not those of a compiled backward)."""
    n = 0
    for c in node.cpu_children:
        if c.name in _COMPILED:
            continue
        n += 1 if c.name.startswith("aten::") else _count_below(c)
    return n


def _unit(e):
    """Return the outermost op or autograd node above ``e`` (``e`` itself when it is one)."""
    best, p = e, e.cpu_parent
    while p is not None:
        if p.name.startswith(("aten::", "autograd::")):
            best = p
        p = p.cpu_parent
    return best


@functools.lru_cache(maxsize=1)
def _our_roots() -> tuple:
    import thundervis
    from thundervis import compiler
    return os.path.dirname(thundervis.__file__) + os.sep, os.path.dirname(compiler.__file__) + os.sep


def _ours(path: str) -> bool:
    """Whether a profiler frame's file is thundervis's own (the run's driver, the CLI)."""
    return path.startswith(_our_roots()) or path == "thundervis" or path.startswith("thundervis/")


def _user_frames(e, limit: int = 4) -> list:
    """Return up to ``limit`` (file, first line, function) of the Python frames above ``e`` that
    are not torch's, innermost first, up to the first of ours (the run that started the script)."""
    out, p = [], e.cpu_parent
    while p is not None and len(out) < limit:
        m = _FRAME.match(p.name)
        if m and _ours(m.group(1)):
            break
        if m and not m.group(1).startswith(_NOT_USER) and "site-packages" not in m.group(1):
            out.append((m.group(1)[:300], int(m.group(2)), m.group(3)[:200]))
        p = p.cpu_parent
    return out


def meter_for(profile) -> Optional[StepShareMeter]:
    """Return a started meter for a run with ``profile`` (a ``ProfileSettings``; None: no meter)."""
    # Only under --profile: --check-numerics / --compare-eager / --capture-inputs alone also make a
    # ProfileSettings, and their checked calls (float64 references, interpreted kernels) are no
    # step to time; profiling one with stacks took a ResNet-18 past 20 GB.
    if profile is None or not getattr(profile, "timing", False):
        return None
    # each chain runs its warm-up calls, K timed calls, K wall-clock calls and its checked or
    # compared calls, then reports (the report is written during the next call): the steps after
    # those run the plain chains
    skip = (getattr(profile, "warmup", 2) + 2 * getattr(profile, "steps", 5)
            + max(getattr(profile, "check_steps", 0) or 0, getattr(profile, "compare_steps", 0) or 0))
    return StepShareMeter(skip).start()


def stop_meter(meter: Optional[StepShareMeter], note: Callable[[str, dict], None]) -> None:
    """Stop ``meter`` and record its ``step_share`` event through ``note`` (nothing when no step ended)."""
    if meter is None:
        return
    try:
        data = meter.stop()
    except Exception as e:  # measuring never fails a run's end
        data = None
        note("step_share_failed", {"error": f"{type(e).__name__}: {e}"[:300]})
    if data is not None:
        note("step_share", data)
