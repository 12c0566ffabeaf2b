"""The verdict of a numerics check: is a kernel's output wrong, or only as inexact as eager float32?

:func:`verdict` judges one output: it is ``flagged`` when its error (max abs error over the output's
largest |reference|) exceeds ``RATIO`` times eager's error of that output and ``FLOOR_ULPS`` units
of its dtype's epsilon, so a different reduction order alone (an error of the order of eager's)
never flags it. :func:`judge` judges a kernel's outputs, measuring their errors in one quick pass
(outputs bit-identical to eager, the common case, are compared with ``memcmp`` and share eager's
error). ``thundervis run --check-numerics`` (:mod:`thundervis.numerics_check`) and ``thundervis
bisect`` use both. Errors are :func:`thundervis.kernel_numerics.errors`'.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from thundervis.kernel_numerics import errors


def _libc_memcmp():
    """libc's ``memcmp`` through ctypes (None where there is no C library to load, e.g. Windows)."""
    try:
        import ctypes
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    return fn


_memcmp = _libc_memcmp()
RATIO = 16.0
FLOOR_ULPS = 64.0
_EPS: dict = {}


def output_eps(outputs: Sequence) -> float:
    """Return the largest machine epsilon among the floating ``outputs`` (tensors or proxies;
    float32's when none is floating)."""
    eps = 0.0
    for o in outputs:
        dtype = o.dtype if isinstance(o, torch.Tensor) else None
        if dtype is not None and dtype.is_floating_point:
            eps = max(eps, _eps(dtype))
    return eps or _eps(torch.float32)


def _eps(dtype) -> float:
    """``torch.finfo(dtype).eps``, looked up once per dtype (finfo costs microseconds a call)."""
    eps = _EPS.get(dtype)
    if eps is None:
        eps = _EPS[dtype] = torch.finfo(dtype).eps
    return eps


def verdict(rel: float, eager_rel: float, eps: float) -> tuple[str, float, float]:
    """Return (``ok`` | ``flagged``, ratio to eager's error, tolerance) for a relative error
    ``rel`` where eager float32 has ``eager_rel`` against the same float64 reference."""
    tolerance = max(RATIO * eager_rel, FLOOR_ULPS * eps)
    ratio = rel / max(eager_rel, eps)
    return ("flagged" if not rel <= tolerance else "ok"), ratio, tolerance


def judge(outs: Sequence, refs: Sequence, eager: Sequence, eager_errors: Optional[Sequence] = None) -> dict:
    """Judge ``outs`` against the float64 ``refs`` output by output, each relative to what
    ``eager`` (float32 on the same inputs) gets wrong for that output, so a small output is not
    hidden by a large one. Return the worst output's ``max_abs``, ``max_rel``, ``eager_abs``,
    ``eager_rel``, ``ratio``, ``tolerance`` and the ``verdict`` (``flagged`` if any output is);
    ValueError when the numbers or shapes of outputs differ. ``eager_errors``: eager's
    ``errors`` per output when already known (bisect judges many passes against one eager).
    Reads nothing but its arguments and never writes to them."""
    if not (len(outs) == len(refs) == len(eager)):
        raise ValueError(f"{len(outs)} outputs, the reference has {len(refs)} and eager {len(eager)}")
    worst = None
    quick = _quick_errors(outs, eager, refs) if eager_errors is None else {}
    worst_key = (False, 0.0)
    for i, o in enumerate(outs):
        found = quick.get(i)
        if found is not None:
            a, rel, ea, erel = found
        else:
            a, rel = errors([o], [refs[i]])
            ea, erel = eager_errors[i] if eager_errors is not None else errors([eager[i]], [refs[i]])
        dtype = o.dtype if isinstance(o, torch.Tensor) else None
        eps = _EPS.get(dtype)
        if eps is None:
            eps = _eps(dtype if dtype is not None and dtype.is_floating_point else torch.float32)
        v, ratio, tol = verdict(rel, erel, eps)
        key = (v == "flagged", ratio)
        if key > worst_key:
            worst_key = key
            worst = {"max_abs": a, "max_rel": rel, "eager_abs": ea, "eager_rel": erel, "ratio": ratio,
                     "tolerance": tol, "verdict": v}
    if worst is None:  # every output exact (or none): zeros, held to the outputs' own floor
        worst = {"max_abs": 0.0, "max_rel": 0.0, "eager_abs": 0.0, "eager_rel": 0.0, "ratio": 0.0,
                 "tolerance": verdict(0.0, 0.0, output_eps(outs))[2], "verdict": "ok"}
    return worst


def _quick(o, e, r) -> bool:
    """True when output ``o``, eager's ``e`` and the reference ``r`` take the fast path of
    :func:`_quick_errors`: tensors of one shape and device, floating, not empty."""
    if not (isinstance(o, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(r, torch.Tensor)
            and o.is_floating_point() and e.is_floating_point() and r.is_floating_point()):
        return False
    shape = o.shape
    if shape != e.shape or shape != r.shape or o.numel() == 0:
        return False
    # is_cpu first: reading .device builds an object, and this runs for every output of every check
    return (o.is_cpu and e.is_cpu and r.is_cpu) or o.device == e.device == r.device


def _exact_match(o, e, r) -> bool:
    """True when output ``o``, eager's ``e`` and the reference ``r`` are tensors of one integer or
    bool dtype, shape and device holding the same values (:func:`_same_bits`): then both errors
    are exactly 0 (what :func:`errors` would compute through float64 copies, a dozen ops more)."""
    return (isinstance(o, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(r, torch.Tensor)
            and not (o.is_floating_point() or o.is_complex()) and o.dtype == e.dtype == r.dtype
            and o.shape == e.shape == r.shape and o.device == e.device == r.device
            and _same_bits(o, r) and _same_bits(e, r))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` (one dtype, shape and device) hold the same elements bit for bit
    (then every error computed from them is the same number). Two dense CPU tensors laid out alike
    are compared by ``memcmp`` over their bytes: 4x faster than ``torch.equal``'s per-element loop
    (0.13 against 0.51 ms for the 79 contiguous outputs of the GPT example's step), and this runs
    for every output of every check. Others go through ``torch.equal`` (which calls -0.0 and 0.0
    the same: no error differs between them either)."""
    if _memcmp is not None and a.is_cpu and (
            (a.is_contiguous() and b.is_contiguous())  # one shape: then one layout, no stride tuples read
            or (a.stride() == b.stride() and _dense(a))) and not (a.is_neg() or b.is_neg()):
        try:
            pa, pb = a.data_ptr(), b.data_ptr()
        except RuntimeError:  # no plain storage (a wrapper subclass)
            return torch.equal(a, b)
        return pa == pb or _memcmp(pa, pb, a.numel() * a.element_size()) == 0
    return torch.equal(a, b)


def _dense(t: torch.Tensor) -> bool:
    """True when ``t``'s elements are exactly the ``numel()`` consecutive storage elements from its
    first one (no gaps, no overlaps, any order of dimensions; strides are never negative)."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def _same_elements(o, e, r, judged: list) -> Optional[int]:
    """Return the index of an output in ``judged`` (``(index, o, e, r)`` of contiguous outputs
    already judged) whose three tensors hold exactly the elements of ``o``, ``e`` and ``r`` with
    the same pairing (a transposed or reshaped view of it in all three: a kernel returning ``x``
    and ``x.t()``), so every maximum over its elements is theirs too; None when there is none."""
    try:
        ptr = o.data_ptr()
        for k, ko, ke, kr in judged:
            if (ptr == ko.data_ptr() and e.data_ptr() == ke.data_ptr() and r.data_ptr() == kr.data_ptr()
                    and o.dtype == ko.dtype and e.dtype == ke.dtype and r.dtype == kr.dtype
                    and o.numel() == ko.numel() and o.stride() == e.stride() == r.stride() and _dense(o)):
                return k
    except RuntimeError:  # a tensor without storage (a wrapper subclass): judged on its own
        return None
    return None


def _float64_difference(x: torch.Tensor, r64: torch.Tensor) -> torch.Tensor:
    """Return ``x - r64`` in float64, exactly promoted (``r64``: float64, or eager's own values
    where they are the reference), as a new tensor (``x`` is never written:
    ``double()`` of a float64 tensor is that tensor). A float64 - float32 subtraction takes
    torch's slower mixed-dtype loop, so a narrower ``x`` is raised first, then subtracted in place."""
    if x.dtype == torch.float64:
        return torch.sub(x, r64)
    return x.to(torch.float64).sub_(r64)


def _quick_errors(outs: Sequence, eager: Sequence, refs: Sequence) -> dict:
    """Return ``{index: (abs, rel, eager abs, eager rel)}``: the errors of each output and of
    eager's against the reference as :func:`errors` computes them, for every output where that
    is cheap (see :func:`_quick`) and all values are finite, and for every integer or bool output
    equal to the reference in the kernel and in eager (:func:`_exact_match`: zeros); the others
    are for :func:`errors`.
    All outputs' maxima are read back together after the last output's ops (on a GPU one
    ``tolist``, a single device sync, per kernel); an output that is a view of an earlier one in
    the kernel, eager and the reference alike (:func:`_same_elements`) shares its numbers
    instead of being read again."""
    picked, maxima, judged, aliases, found = [], [], [], {}, {}
    f64 = torch.float64
    on_cpu = True
    for i, (o, e, r) in enumerate(zip(outs, eager, refs)):
        if not _quick(o, e, r):
            if _exact_match(o, e, r):
                found[i] = (0.0, 0.0, 0.0, 0.0)
            continue
        if judged:
            k = _same_elements(o, e, r, judged)
            if k is not None:
                aliases[i] = k
                continue
        dense_r = r.is_contiguous()
        if dense_r and o.is_contiguous() and e.is_contiguous():
            judged.append((i, o, e, r))
        on_cpu = on_cpu and r.is_cpu
        if e is r:  # a region that only moves values: its reference is eager's outputs, exactly
            r64, eager_error = r, r.new_zeros((), dtype=f64)
        else:
            r64 = r if r.dtype == f64 else r.to(f64)
            # amax, not max: torch's full max() is an unvectorized loop, several times slower.
            eager_error = _float64_difference(e, r64).abs_().amax()
        # Most outputs are bit for bit eager's (one read of both): then so are their errors.
        if o.dtype == e.dtype and _same_bits(o, e):
            error = eager_error
        else:
            error = _float64_difference(o, r64).abs_().amax()
        # max |r| = max(-min r, max r): one read of r, no buffer (aminmax copies a strided r first:
        # then amin and amax, two reads, are 4x faster). r64 is laid out as r.
        if dense_r:
            low, high = torch.aminmax(r64)
        else:
            low, high = r64.amin(), r64.amax()
        maxima += (error, eager_error, low, high)
        picked.append(i)
    if not picked:
        return found
    # On the CPU each maximum's item() (a plain read: 2 against 4 µs for a stack and a tolist of
    # 12 scalars, whose unsqueeze per scalar costs more), elsewhere one stack and one copy.
    values = [t.item() for t in maxima] if on_cpu else torch.stack(maxima).tolist()
    for n, i in enumerate(picked):
        a, ea, low, high = values[4 * n: 4 * n + 4]
        scale = max(-low, high)
        if math.isfinite(a) and math.isfinite(ea) and math.isfinite(scale):
            found[i] = (a, (a / scale if scale > 0 else a), ea, (ea / scale if scale > 0 else ea))
    for i, k in aliases.items():
        if k in found:
            found[i] = found[k]
    return found
