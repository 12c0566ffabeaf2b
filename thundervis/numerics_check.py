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

The verdict (:mod:`thundervis.numerics_verdict`: :func:`verdict` per output, :func:`judge` over a
kernel's outputs; ``thundervis bisect`` uses both): a kernel is ``flagged`` when the error of one of its outputs (max abs error over that
output's largest |reference|) exceeds ``RATIO`` times eager's error of that output and
``FLOOR_ULPS`` units of its dtype's epsilon,
so a different reduction order alone (an error of the order of eager's) never flags it; regions
that draw random numbers are ``skipped`` (no reference can draw the same ones).
"""
from __future__ import annotations

import contextlib
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
from thundervis.numerics_verdict import FLOOR_ULPS, RATIO, judge, output_eps, verdict  # noqa: F401  (bisect's too)
from thundervis.rerun import float64_region, reference_outputs


_RANDOM = re.compile(r"(^|\.)(rand\w*|randn\w*|normal\w*|uniform|log_normal|multinomial|bernoulli\w*|"
                     r"native_dropout\w*|philox\w*)$")


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
