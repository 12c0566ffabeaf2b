"""What one chain call really keeps live, measured with PyTorch's own means (``run --profile``).

On CUDA: ``torch.cuda.reset_peak_memory_stats`` before the call and ``max_memory_allocated`` after
it, less what was allocated when it began. On CPU: the profiler's allocator events
(``torch.profiler.profile(profile_memory=True)``; every allocation and free of the CPU allocator,
Inductor's buffers included), summed in time order; the peak of that running sum is what the call
added at its highest. ``baseline`` is the bytes of the call's inputs that the static timeline counts
as live at its start (a backward's inputs: its saved values and the incoming ``grad_out_*``
gradients), measured from the real tensors' storages, each storage once, parameters left out as
the static timeline leaves them out (the step did not allocate them; the step peak adds all
parameters once). Buffers reach a backward as plain tensors, so a saved buffer (a mask) stays in
the measured baseline while the static one leaves it out. The gradients must be in
it: the backward frees them as it goes, and those frees are in the running sum, so leaving them out
of the baseline made the measured peak low by their size (2.1 MB, the logits' gradient, on a tiny
GPT-2).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def input_storage_bytes(names: Sequence[str], args: Sequence, chain: str) -> int:
    """Return the bytes of the distinct storages of ``args`` (named ``names``) that the static
    timeline of a ``chain`` counts live at its start: none for a forward, a backward's inputs (saved
    values and incoming gradients, parameters and views of them excluded)."""
    if chain != "backward":
        return 0
    seen, total = set(), 0
    for name, t in zip(names, args):
        if not isinstance(t, torch.Tensor) or t.device.type == "meta" or _parameter(t):
            continue
        try:
            s = t.untyped_storage()
        except Exception:  # a tensor without a storage (a subclass): nothing to count
            continue
        key = (t.device, s.data_ptr())
        if key not in seen:
            seen.add(key)
            total += s.nbytes()
    return total


def _parameter(t: torch.Tensor) -> bool:
    """Return whether ``t`` is a module parameter or a view of one (autograd hands a backward the
    saved parameters themselves): allocated before the step, so counted in the parameters line."""
    base = t._base if t._base is not None else t
    return isinstance(base, torch.nn.Parameter)


def _cpu_peak(prof) -> int:
    """Return the highest running sum of the CPU allocator's events in ``prof`` (every thread the
    profiler saw: a build worker's thread allocating meanwhile would count too)."""
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")]
    live = top = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        top = max(top, live)
    return top


def measured_call(fn: Callable, args, device: str) -> tuple:
    """Return (``fn(args)``, {"method", "peak_bytes"}): what the call allocated at its highest
    above what was allocated when it began (never below 0)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn(args)
        torch.cuda.synchronize()
        return out, {"method": "torch.cuda.max_memory_allocated",
                     "peak_bytes": max(0, torch.cuda.max_memory_allocated() - start)}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(args)
    return out, {"method": "torch.profiler memory events (CPU allocator)",
                 "peak_bytes": _cpu_peak(prof)}
