"""``thundervis run --check-numerics``: each fusion's outputs against a float64 reference of its
region on the same inputs, judged against what eager float32 itself gets wrong.

The compiler calls :class:`KernelChecker` after each fusion of the first K calls of every chain
(``compiler/numerics_hooks.py``) with the fusion symbol, the tensors the kernel was given, what it
returned, i.e. whatever actually ran (Triton, Inductor, torch), and the chain's decomposed ATen
ops. The region (the fusion's member prims) runs twice on those inputs: raised to float64 with its
floating dtype constants raised too (the reference) and as is (eager, in the inputs' own dtypes). Both run through functions generated
once per kernel that call exact ATen overloads
(:func:`thundervis.compiler.executors.cpu_path.torch_region`, what the CPU path runs): the prims of
a decomposed ATen op the region holds whole run as that op, as eager PyTorch runs it, so the
reference is the op's own float64 result and a kernel computing a wrong decomposition of it is
flagged; the other members one by one. On the CPU path the kernel's own call is eager's run when
its launcher witnessed it (``CpuRegion.run_witnessed``: the kernel's outputs are the very tensors the
torch function, whose calls are eager's, returned for these inputs in that call; see
:func:`check_region`), and eager is not run again; anything else gets eager run apart. A check costs
a float64 run and an eager run of the region and the judging (on the CPU path, with a witnessed
call, the float64 run and the judging); a region
those functions cannot be built for runs in the reference interpreter
(:func:`thundervis.rerun.reference_outputs`). Errors are
:func:`thundervis.kernel_numerics.errors` (max abs error, and that over the largest |reference|).

The verdict (:func:`verdict` per output, :func:`judge` over a kernel's outputs; ``thundervis bisect``
uses both): a kernel is ``flagged`` when the error of one of its outputs (max abs error over that
output's largest |reference|) exceeds ``RATIO`` times eager's error of that output and
``FLOOR_ULPS`` units of its dtype's epsilon,
so a different reduction order alone (an error of the order of eager's) never flags it; regions
that draw random numbers are ``skipped`` (no reference can draw the same ones).
"""
from __future__ import annotations

import contextlib
import math
import re
import time
from typing import Callable, Optional, Sequence

import torch
from torch.utils._python_dispatch import _disable_current_modes

try:  # private torch API: without it, every check pops the (usually empty) mode stacks
    from torch._ops import _len_torch_dispatch_stack_pre_dispatch
except ImportError:  # pragma: no cover - other torch versions
    _len_torch_dispatch_stack_pre_dispatch = None

from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, TensorProxy, Trace
from thundervis.compiler.numerics_hooks import flat_tensors
from thundervis.kernel_numerics import errors
from thundervis.rerun import float64_region, reference_outputs

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
_RANDOM = re.compile(r"(^|\.)(rand\w*|randn\w*|normal\w*|uniform|log_normal|multinomial|bernoulli\w*|"
                     r"native_dropout\w*|philox\w*)$")
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


# torch.inference_mode() is a Python class around this guard, whose own __init__ and __enter__ cost
# more than the guard (this runs once per checked kernel call); the class where the guard is gone.
_INFERENCE_MODE = getattr(torch._C, "_InferenceMode", None)


def _inference_mode():
    """A context running its body in inference mode (see :data:`_INFERENCE_MODE`)."""
    return _INFERENCE_MODE(True) if _INFERENCE_MODE is not None else torch.inference_mode()


def _without_dispatch_modes():
    """``_disable_current_modes()`` when a dispatch mode is active, else a no-op context: popping
    and pushing the (usually empty) mode stacks costs tens of µs a call, once per checked kernel."""
    if (_len_torch_dispatch_stack_pre_dispatch is None or torch._C._len_torch_dispatch_stack()
            or _len_torch_dispatch_stack_pre_dispatch()):
        return _disable_current_modes()
    return contextlib.nullcontext()


def region_of(symbol: BoundSymbol) -> Trace:
    """Return the trace of a fusion symbol's region: its arguments -> its member prims -> its outputs."""
    inputs = tuple(symbol.args)
    if not all(isinstance(p, TensorProxy) for p in inputs):
        raise ValueError("a fusion argument is not a tensor")
    outputs = tuple(symbol.flat_outputs())
    return Trace(name=symbol.sym, inputs=inputs, symbols=tuple(symbol.subsymbols), outputs=outputs,
                 chain="numerics")


def is_random(symbol: BoundSymbol) -> bool:
    """True when the region draws random numbers."""
    return any(_RANDOM.search(s.sym) for s in symbol.subsymbols)


# Prims that only move values (every output element is one of the inputs' elements, unchanged), so
# they compute the same numbers in any floating dtype. ``constant_pad_nd`` is not one: its pad value
# is rounded to the tensor's dtype.
_VALUE_MOVING = frozenset(f"prims.{n}" for n in """view expand permute squeeze unsqueeze slice cat clone alias
select index_select gather flip""".split())


def moves_values_only(symbol: BoundSymbol) -> bool:
    """True when every member of a fusion's region only moves values (a view, a permutation, a
    copy, a concatenation ...: :data:`_VALUE_MOVING`): its float64 reference is then eager's
    outputs raised exactly, and no float64 run is needed to know it."""
    return bool(symbol.subsymbols) and all(s.sym in _VALUE_MOVING for s in symbol.subsymbols)


def region_functions(symbol: BoundSymbol, parents: Optional[dict] = None) -> Optional[tuple]:
    """Return ``(eager, reference)`` for a fusion symbol: functions of the kernel's input tensors
    returning the region's outputs, ``eager`` running the region in the inputs' dtypes and
    ``reference`` the same with floating dtype constants raised to float64 (to be called on inputs
    raised to float64); each calls exact ATen overloads
    (:func:`~thundervis.compiler.executors.cpu_path.torch_region`). ``parents``: the chain's
    decomposed ATen symbols (``claim.DECOMPOSED``, {uid: symbol}): the prims of one that the region
    holds whole run as that ATen call, as eager PyTorch runs it (a layer norm is one call, not
    twelve), so the reference is the op's own float64 result, not its decomposition's; without
    them, the members one by one. None when they cannot be built (the caller then uses the
    reference interpreter). ``reference`` is None for a region that only moves values
    (:func:`moves_values_only`): its reference is eager's outputs, raised exactly."""
    from thundervis.compiler.executors.cpu_path import torch_region
    from thundervis.rerun import float64_symbol
    # Only the parents the region's members come from: a chain has dozens, a region one or two.
    origins = {s.origin[0] for s in symbol.subsymbols if len(s.origin) == 1}
    mine = {uid: p for uid, p in (parents or {}).items() if uid in origins}
    moving = moves_values_only(symbol)
    try:
        raised = None if moving else symbol.replace(subsymbols=float64_region(region_of(symbol)).symbols)
    except Exception:  # a fusion argument that is not a tensor: interpret
        return None
    # Folded as the CPU path folds them, else (a parent without a binding) the members one by one.
    for folded in ([mine] if mine else []) + [None]:
        try:
            eager = torch_region(symbol, folded)
            if moving:
                return eager, None
            raised_folded = {uid: float64_symbol(p) for uid, p in folded.items()} if folded else None
            return eager, torch_region(raised, raised_folded)
        except Exception:  # an op without a torch binding, a name the generator refuses
            continue
    return None  # interpret


def check_region(symbol: BoundSymbol, inputs: Sequence, outputs, functions: Optional[tuple] = None,
                 random: Optional[bool] = None, spent: Optional[dict] = None,
                 eager_made: bool = False) -> dict:
    """Return the JSON-able result of one checked kernel call (``kernel``, ``uid``, ``executor``,
    ``max_abs``/``max_rel`` of the kernel and ``eager_abs``/``eager_rel`` of eager float32 against
    float64, ``ratio``, ``tolerance``, ``verdict``, ``detail``). ``functions``: the region's
    :func:`region_functions` (built here when None; empty: use the reference interpreter);
    ``random``: :func:`is_random` of the symbol when already known; ``spent``: when a dict, the
    seconds of each part of the check are added to it (:data:`CHECK_PARTS`); ``eager_made``: the
    kernel's ``outputs`` are what the eager function of ``functions`` itself returned for these
    ``inputs`` in the kernel's call (the CPU path, witnessed by its launcher): they are eager's
    outputs, and that function is not run a second time on the same tensors."""
    if (is_random(symbol) if random is None else random):
        return {"kernel": symbol.sym, "uid": symbol.uid, "executor": symbol.executor or "", "verdict": "skipped",
                "detail": "the region draws random numbers"}
    outs = flat_tensors(outputs)
    # The check runs inside the compiled chain, under AOTAutograd's dispatch mode; its own ops need
    # none of it (plain tensors in, plain numbers out), so they run without it: several times faster;
    # inference mode, not no_grad: its ops skip autograd's bookkeeping (version counters, views).
    with _inference_mode(), _without_dispatch_modes():
        if functions is None:
            functions = region_functions(symbol)
        clock = _PartClock(spent)
        if functions:
            # No detach: under inference mode no op of the check records autograd history.
            eager_fn, reference_fn = functions
            if reference_fn is None:  # values moved, not computed: the reference is eager's, exactly
                refs = eager = outs if eager_made else flat_tensors(eager_fn(*inputs))
                clock.lap("eager float32")
            else:
                raised = [t.double() if t.is_floating_point() else t for t in inputs]
                clock.lap("inputs to float64")
                refs = flat_tensors(reference_fn(*raised))
                clock.lap("float64 reference")
                eager = outs if eager_made else flat_tensors(eager_fn(*inputs))
                clock.lap("eager float32")
        else:
            args = [t.detach() for t in inputs]
            region = region_of(symbol)
            refs = reference_outputs(region, args)
            clock.lap("float64 reference")
            eager = flat_tensors(run_trace(region, args))
            clock.lap("eager float32")
        judged = judge(outs, refs, eager)
        clock.lap("judging")
    judged.update(kernel=symbol.sym, uid=symbol.uid, executor=symbol.executor or "", detail="")
    return judged


# The parts of a check, in the order they run (what ``spent`` of :func:`check_region` adds up).
CHECK_PARTS = ("inputs to float64", "float64 reference", "eager float32", "judging")


class _PartClock:
    """Adds the seconds since the previous lap to ``spent[part]`` at each :meth:`lap`; does nothing
    (reads no clock) when ``spent`` is None, as in every run but a benchmark's."""

    __slots__ = ("spent", "t")

    def __init__(self, spent: Optional[dict]):
        self.spent = spent
        self.t = time.perf_counter() if spent is not None else 0.0

    def lap(self, part: str) -> None:
        if self.spent is not None:
            now = time.perf_counter()
            self.spent[part] = self.spent.get(part, 0.0) + now - self.t
            self.t = now


class KernelChecker:
    """The ``checker`` of ``ProfileSettings`` for ``--check-numerics``: a callable
    ``(symbol, inputs, outputs, parents, made_by) -> dict`` (:func:`check_region`). It builds each
    kernel's :func:`region_functions` (with the chain's decomposed ATen symbols ``parents``) on its
    first check and keeps them for the later checked calls. ``made_by``: the generated function
    the launcher witnessed return ``outputs`` for ``inputs`` (``numerics_hooks``), or None; when it
    makes the calls of the region's eager function (:func:`_same_function`), the outputs are
    eager's (``check_region``'s ``eager_made``);
    ``spent``: see :func:`check_region` (the overhead benchmark's breakdown)."""

    def __init__(self, spent: Optional[dict] = None) -> None:
        # id(symbol) -> [symbol, region_functions(symbol), is_random(symbol), the last ``made_by``
        # found to be the region's eager function]
        self._functions: dict = {}
        self.spent = spent  # a dict: the seconds per part of every check go there (check_region)

    def __call__(self, symbol: BoundSymbol, inputs: Sequence, outputs, parents: Optional[dict] = None,
                 made_by: Optional[Callable] = None) -> Optional[dict]:
        known = self._functions.get(id(symbol))
        if known is None or known[0] is not symbol:
            random = is_random(symbol)
            known = [symbol, None if random else region_functions(symbol, parents), random, None]
            self._functions[id(symbol)] = known
        functions = known[1] or ()
        eager_made = made_by is not None and (made_by is known[3] or _same_function(made_by, functions))
        if eager_made:
            known[3] = made_by
        return check_region(symbol, inputs, outputs, functions, known[2], self.spent, eager_made)


def _same_function(made_by: Callable, functions: tuple) -> bool:
    """True when ``made_by`` (a generated region function) makes exactly the calls of the eager
    function in ``functions`` (:func:`region_functions`): the same generated source over the same
    ATen overloads (``code_key`` of :func:`~thundervis.compiler.executors.cpu_path.torch_region`)."""
    key = getattr(made_by, "code_key", None)
    return bool(functions) and key is not None and key == getattr(functions[0], "code_key", None)
