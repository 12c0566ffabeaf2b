"""Per-op correctness harness over PyTorch's OpInfo database (float32, CPU).

For one OpInfo and a few of its sample inputs, :func:`check_op` compiles ``op(*sample)`` with the
thundervis backend and compares with eager: outputs, and gradients of the sum of the float outputs
where the op supports autograd. It also runs the ``decompose`` trace of every compiled chain through
the reference interpreter with ``expand=True`` (the prims instead of the parent ATen ops) on the
inputs that chain really received, and compares with the ATen ops of the trace that chain was
compiled from: the torch executor runs parent ops, so without this a wrong decomposition would go
unnoticed. Under ``remat auto`` that trace is pass 1, ``remat`` (the min-cut partition, which runs);
pass 0, ``acquire``, is the ``off`` partition, whose signature may differ (a backward that recomputes
takes other saved values), so it is the reference only where there is no ``remat`` pass.

Used by ``scripts/opinfo_coverage.py`` (the whole sweep) and ``tests/compiler/test_opinfo.py``
(a representative subset).
"""
from __future__ import annotations

import itertools
import os
import signal
import time
import traceback
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch._dynamo
import torch.utils._pytree as pytree

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.interpreter import run_trace

DEVICE = "cpu"
DTYPE = torch.float32
CHAINS = ("forward", "backward", "inference")
# The sweep tests what users run: the device's default executors (None; on a CPU-only machine the
# Triton interpreter, then torch). Any list of executor names can be passed instead.
DEFAULT_EXECUTORS = None

# Outcome of one op, best first. "lowered" and "torch" are compiled and matching; "eager" fell back
# entirely (graph break or a graph our compiler declined); the last two are failures.
LOWERED, TORCH_FALLBACK, EAGER_FALLBACK, MISMATCH, CRASH, SKIPPED = (
    "lowered", "torch fallback", "eager fallback", "mismatch", "crash", "skipped")
FAILURES = (MISMATCH, CRASH)


def op_db() -> list:
    """Return the OpInfos of PyTorch's database that support float32 on CPU."""
    from torch.testing._internal.common_methods_invocations import op_db as db
    return [op for op in db if DTYPE in op.supported_dtypes(DEVICE)]


def op_id(op) -> str:
    """Return ``name`` or ``name.variant`` (unique per OpInfo)."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


@dataclass
class OpResult:
    """What :func:`check_op` found for one op: ``status`` (see the module constants), the reason
    (fallback notes, first mismatch, crash message), samples run, whether it is random, seconds."""

    op: str
    status: str
    reason: str = ""
    samples: int = 0
    random: bool = False
    seconds: float = 0.0
    not_lowered: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the result as a JSON-able dict."""
        return {"op": self.op, "status": self.status, "reason": self.reason, "samples": self.samples,
                "random": self.random, "seconds": round(self.seconds, 3), "not_lowered": self.not_lowered}


class _SampleFailure(Exception):
    """One sample did not match or crashed; ``status`` says which."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Recorder(CompileObserver):
    """Keeps every chain's traces by pass name, and the compile failures."""

    def __init__(self):
        self.graphs = 0
        self.traces: dict = {}  # (graph, chain) -> {pass name: Trace}
        self.failures: list = []  # (graph, chain, error)

    def graph_started(self, graph, info):
        self.graphs += 1

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.traces.setdefault((graph, chain), {})[name] = trace

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((graph, chain, error))


class _CapturingCompiler(ThundervisCompiler):
    """The thundervis backend, plus a copy of the inputs each compiled chain is called with (the
    decomposition check replays them)."""

    def __init__(self, observer: _Recorder, executors=None, remat=None):
        super().__init__(executors=executors, debug=True, observer=observer, remat=remat)
        self.chain_inputs: dict = {}

    def _chain_compiler(self, graph, chain):
        inner = super()._chain_compiler(graph, chain)
        captured = self.chain_inputs

        def compile_fx_graph(gm, example_inputs):
            fn = inner(gm, example_inputs)

            def run(args):
                if (graph, chain) not in captured:
                    captured[(graph, chain)] = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
                return fn(args)
            run._boxed_call = True
            return run
        return compile_fx_graph


def tolerance(op) -> tuple[float, float]:
    """Return (rtol, atol) for float32: assert_close's defaults, widened by any float32
    ``toleranceOverride`` the OpInfo declares for its own tests."""
    rtol, atol = 1.3e-6, 1e-5
    for info in getattr(op, "decorators", ()) or ():
        for d in getattr(info, "decorators", ()) or ():
            tol = getattr(d, "d", None)
            if isinstance(tol, dict) and DTYPE in tol:
                t = tol[DTYPE]
                if isinstance(t, (int, float)):  # precisionOverride: an atol
                    atol = max(atol, float(t))
                else:
                    atol, rtol = max(atol, t.atol), max(rtol, t.rtol)
    return rtol, atol


def _clone_inputs(leaves: list) -> list:
    out = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            y = x.detach().clone()
            if x.requires_grad and (y.is_floating_point() or y.is_complex()):
                y.requires_grad_(True)
            out.append(y)
        else:
            out.append(x)
    return out


def _unseeded(fn):
    """Return ``fn`` without OpInfo's ``wrapper_set_seed`` (random ops reseed inside, which Dynamo
    cannot trace): the same code with that global bound to a plain call."""
    code = getattr(fn, "__code__", None)
    if code is None or "wrapper_set_seed" not in code.co_names:
        return fn
    scope = {**fn.__globals__, "wrapper_set_seed": lambda f, *a, **k: f(*a, **k)}
    return types.FunctionType(code, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def _sample_function(op, sample):
    """Return (fn taking the sample's tensors positionally, those tensors)."""
    call = _unseeded(op.op)
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i] for i in slots]
    fixed = list(leaves)

    def fn(*ts):
        vals = list(fixed)
        for i, t in zip(slots, ts):
            vals[i] = t
        inp, args, kwargs = pytree.tree_unflatten(vals, spec)
        return call(inp, *args, **kwargs)
    return fn, tensors


def _float_outputs(out) -> list:
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _grads(out, inputs: list) -> Optional[list]:
    """Return d(sum of float outputs)/d(inputs that require grad), or None when nothing flows."""
    wrt = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    outs = [t for t in _float_outputs(out) if t.requires_grad]
    if not wrt or not outs:
        return None
    total = sum(o.sum() for o in outs)
    return list(torch.autograd.grad(total, wrt, allow_unused=True))


def _same(actual, expected, rtol, atol, what: str, shapes_only: bool = False) -> None:
    """Raise _SampleFailure(MISMATCH) when ``actual`` and ``expected`` differ."""
    try:
        if shapes_only:
            a = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t) for t in pytree.tree_leaves(actual)]
            e = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t) for t in pytree.tree_leaves(expected)]
            assert a == e, f"shapes/dtypes {a} != {e}"
        else:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        msg = " ".join(str(e).split())
        raise _SampleFailure(MISMATCH, f"{what}: {msg[:300]}") from None


def _detached(x):
    return pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, x)


def _is_random(fn, tensors) -> bool:
    """Return True when two eager runs with different seeds give different results."""
    with torch.no_grad():
        torch.manual_seed(0)
        a = fn(*_clone_inputs(tensors))
        torch.manual_seed(1)
        b = fn(*_clone_inputs(tensors))
    try:
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
        return False
    except Exception:
        return True


def _is_compiler_bug(error: str) -> bool:
    """A chain failure is our bug unless the compiler declined the graph on purpose
    (``UnsupportedGraph``: dynamic shapes, tensor constants, effectful ops ...)."""
    return not (error.startswith("unsupported") or error.startswith("UnsupportedGraph"))


def _not_lowered(traces: dict) -> list[str]:
    """Return ``sym: note`` for every top-level ATen symbol left unlowered in the decompose traces."""
    out = []
    for (graph, chain), by_pass in traces.items():
        t = by_pass.get("decompose")
        if chain not in CHAINS or t is None:
            continue
        for b in t.symbols:
            if b.sym.startswith("prims.") or b.subsymbols or b.sym == "del":
                continue
            out.append(f"{b.sym}: {(b.note or 'not lowered').removeprefix('not lowered: ')}")
    return sorted(set(out))


def _check_decompositions(rec: _Recorder, compiler: _CapturingCompiler, rtol, atol, shapes_only) -> int:
    """Replay each chain's decompose trace (prims) against the ATen trace it was decomposed from
    (``remat`` where the chain has one, else ``acquire``) on the inputs the chain was called with;
    return how many chains were checked."""
    checked = 0
    for key, by_pass in sorted(rec.traces.items()):
        if key[1] not in CHAINS or key not in compiler.chain_inputs:
            continue
        # acquire is the off partition's chain; what ran (and was decomposed) is remat's when present
        acquired, decomposed = by_pass.get("remat", by_pass.get("acquire")), by_pass.get("decompose")
        if acquired is None or decomposed is None:
            continue
        inputs = compiler.chain_inputs[key]
        try:
            with torch.no_grad():
                torch.manual_seed(0)
                expected = run_trace(acquired, list(inputs), expand=False)
                torch.manual_seed(0)
                actual = run_trace(decomposed, list(inputs), expand=True)
        except Exception as e:
            raise _SampleFailure(CRASH, f"decomposed {key[1]} trace fails in the interpreter: "
                                        f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
        _same(actual, expected, rtol, atol, f"decomposed {key[1]} trace", shapes_only)
        checked += 1
    return checked


def check_sample(op, sample, *, grads: bool = True, decompositions: bool = True,
                 executors=DEFAULT_EXECUTORS, remat=None) -> dict:
    """Compile and compare one sample; return {"status", "reason", "not_lowered", "random"}.

    ``executors``: executor names for the backend (None: the device's default order); ``remat``:
    the backend's rematerialization policy, ``off`` or ``auto`` (None: the default, ``auto``).

    Raises _SampleFailure for mismatches and crashes of our compiler.
    """
    rtol, atol = tolerance(op)
    fn, tensors = _sample_function(op, sample)
    # empty, new_empty ... return uninitialized memory: like random ops, only metadata is comparable.
    random = "empty" in op.name or _is_random(fn, tensors)
    want_grad = grads and op.supports_autograd and any(t.requires_grad for t in tensors)

    torch.manual_seed(0)
    e_in = _clone_inputs(tensors)
    with torch.set_grad_enabled(want_grad):
        expected = fn(*e_in)
        expected_grads = _grads(expected, e_in) if want_grad else None

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    rec = _Recorder()
    compiler = _CapturingCompiler(rec, executors, remat)
    compiled = torch.compile(fn, backend=compiler, dynamic=False)
    torch.manual_seed(0)
    c_in = _clone_inputs(tensors)
    try:
        with torch.set_grad_enabled(want_grad):
            actual = compiled(*c_in)
            actual_grads = _grads(actual, c_in) if want_grad and expected_grads is not None else None
    except Exception as e:
        raise _SampleFailure(CRASH, f"compiled call raised {type(e).__name__}: {_first_line(e)}") from None

    breaks = sorted(torch._dynamo.utils.counters["graph_break"])
    ours = [f for f in rec.failures if f[1] is not None]
    compiler_bugs = [f for f in ours if _is_compiler_bug(f[2])]
    if compiler_bugs:
        g, chain, err = compiler_bugs[0]
        raise _SampleFailure(CRASH, f"{chain} chain: {_one_line(err, 300)}")

    _same(_detached(actual), _detached(expected), rtol, atol, "forward", random)
    if expected_grads is not None:
        _same(actual_grads, expected_grads, rtol, atol, "gradients", random)

    compiled_chains = [k for k, v in rec.traces.items() if k[1] in CHAINS and "codegen" in v]
    if not compiled_chains:
        if breaks:
            reason = f"graph break: {_one_line(breaks[0])}"
        elif rec.failures:
            reason = f"{rec.failures[0][1] or 'graph'}: {_one_line(rec.failures[0][2])}"
        elif rec.graphs == 0:
            reason = "Dynamo produced no graph (ran eagerly)"
        else:
            reason = "no chain compiled"
        return {"status": EAGER_FALLBACK, "reason": reason, "not_lowered": [], "random": random}
    if decompositions:
        _check_decompositions(rec, compiler, rtol, atol, random)
    missing = _not_lowered(rec.traces)
    declined = [f for f in ours if f[1] in CHAINS]  # a failed joint record alone changes nothing
    if breaks or declined:
        reason = (f"graph break: {_one_line(breaks[0])}" if breaks
                  else f"{declined[0][1]} chain: {_one_line(declined[0][2])}")
        return {"status": EAGER_FALLBACK, "reason": reason, "not_lowered": missing, "random": random}
    if missing:
        return {"status": TORCH_FALLBACK, "reason": missing[0], "not_lowered": missing, "random": random}
    return {"status": LOWERED, "reason": "", "not_lowered": [], "random": random}


def _first_line(e) -> str:
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else ""


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: Optional[float]):
    if not seconds or not hasattr(signal, "SIGALRM") or os.name != "posix":
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout(f"took longer than {seconds:.0f} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_ORDER = [CRASH, MISMATCH, EAGER_FALLBACK, TORCH_FALLBACK, LOWERED]


def check_op(op, *, samples: int = 2, grads: bool = True, decompositions: bool = True,
             timeout: Optional[float] = None, executors=DEFAULT_EXECUTORS, remat=None) -> OpResult:
    """Check up to ``samples`` sample inputs of OpInfo ``op`` (``remat``: see :func:`check_sample`);
    return the worst outcome as an :class:`OpResult`. Never raises (a crash of the harness itself is
    reported as ``crash``)."""
    t0 = time.perf_counter()
    result = OpResult(op_id(op), LOWERED)
    worst = None
    try:
        with _time_limit(timeout):
            grad_ok = grads and op.supports_autograd
            gen = op.sample_inputs(DEVICE, DTYPE, requires_grad=grad_ok)
            for sample in itertools.islice(gen, samples):
                try:
                    r = check_sample(op, sample, grads=grads, decompositions=decompositions,
                                     executors=executors, remat=remat)
                except _SampleFailure as f:
                    r = {"status": f.status, "reason": f.reason, "not_lowered": [], "random": False}
                result.samples += 1
                result.random = result.random or r["random"]
                result.not_lowered = sorted(set(result.not_lowered) | set(r["not_lowered"]))
                if worst is None or _ORDER.index(r["status"]) < _ORDER.index(worst["status"]):
                    worst = r
                if worst["status"] in FAILURES:
                    break
    except _Timeout as e:
        worst = {"status": CRASH, "reason": f"timeout: {e}"}
    except Exception as e:  # the sample generator or eager itself failing: not our compiler's fault
        worst = worst if worst and worst["status"] in FAILURES else {
            "status": SKIPPED, "reason": f"harness: {type(e).__name__}: {_first_line(e)}",
            "tb": traceback.format_exc()}
    finally:
        torch._dynamo.reset()
    if worst is None:
        worst = {"status": SKIPPED, "reason": "no sample inputs"}
    result.status, result.reason = worst["status"], worst["reason"]
    result.seconds = time.perf_counter() - t0
    return result
