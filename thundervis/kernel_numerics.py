"""The numerics of re-running one kernel, shared by ``thundervis rerun`` and the scripts
``thundervis repro`` writes: inputs made from recorded metadata, errors against a float64 reference,
timing. Self-contained (torch and the standard library only, no thundervis import): ``repro`` copies
this module's source into every script it writes, so a repro script measures exactly as rerun does.
"""
import math
import statistics
import time

import torch


def make_inputs(specs, seed=0):
    """Return one tensor per ``(shape, strides or None, torch dtype, device)`` of ``specs``: normal
    values for floating and complex dtypes, 0/1 for bool, 0..7 for integers, from a generator
    seeded with ``seed``, laid out with the given strides."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for shape, strides, dtype, device in specs:
        check_layout(shape, strides)
        if dtype.is_floating_point or dtype.is_complex:
            base = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        elif dtype == torch.bool:
            base = torch.randint(0, 2, shape, generator=gen).bool()
        else:
            base = torch.randint(0, 8, shape, generator=gen).to(dtype)
        t = torch.empty_strided(shape, strides, dtype=dtype, device=device) if strides is not None \
            else torch.empty(shape, dtype=dtype, device=device)
        t.copy_(base)
        out.append(t)
    return out


def check_layout(shape, strides):
    """Raise ValueError when a recorded layout would need an absurd storage: more than
    ``4 * numel + 2**26`` elements (a tampered stride of 10**12 asks for terabytes). Strides may be
    None (contiguous)."""
    if strides is None:
        return
    shape, strides = [int(d) for d in shape], [int(s) for s in strides]
    if len(strides) != len(shape) or any(d < 0 for d in shape) or any(s < 0 for s in strides):
        raise ValueError(f"strides {strides} do not fit shape {shape}")
    numel = 1
    for d in shape:
        numel *= d
    storage = 0 if numel == 0 else 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    if storage > 4 * numel + 2 ** 26:
        raise ValueError(f"strides {strides} of shape {shape} need {storage} elements of storage for "
                         f"{numel} values")


def errors(outs, refs):
    """Return (max abs error, max abs error / max |ref|) of ``outs`` against ``refs`` over all
    outputs; raise ValueError when their number or shapes differ. Equal values (infinities and NaN
    included) count as no error; any other mismatch involving a non-finite value as an infinite one."""
    max_abs, max_ref = 0.0, 0.0
    if len(outs) != len(refs):
        raise ValueError(f"{len(outs)} outputs, the reference has {len(refs)}")
    for o, r in zip(outs, refs):
        o64, r64 = o.detach().to("cpu", torch.float64), r.detach().to("cpu", torch.float64)
        if o64.shape != r64.shape:
            raise ValueError(f"output shape {list(o64.shape)} differs from the reference {list(r64.shape)}")
        if o64.numel():
            # Fast path: all values finite (the usual case) needs a handful of ops.
            m = float((o64 - r64).abs().max())
            if math.isfinite(m):
                max_abs, max_ref = max(max_abs, m), max(max_ref, float(r64.abs().max()))
                continue
            finite = torch.isfinite(r64)
            same = (o64 == r64) | (o64.isnan() & r64.isnan())
            diff = torch.where(same, torch.zeros_like(r64), (o64 - r64).abs())
            diff = torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf"))
            max_abs = max(max_abs, float(diff.max()))
            if finite.any():
                max_ref = max(max_ref, float(r64[finite].abs().max()))
    return max_abs, (max_abs / max_ref if max_ref > 0 else max_abs)


def timed(fn, inputs, iters, device):
    """Call ``fn(list(inputs))`` once to warm up, then ``iters`` times; return (median us, min us,
    clock, outputs of the warm-up call). On CUDA (``device`` starting with ``cuda``) each call is
    timed with CUDA events (``device`` clock), elsewhere with the host clock."""
    outs = fn(list(inputs))
    samples = []
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(list(inputs))
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b) * 1e3)
        clock = "device"
    else:
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            fn(list(inputs))
            samples.append((time.perf_counter_ns() - t0) / 1e3)
        clock = "host"
    return float(statistics.median(samples)), float(min(samples)), clock, outs
