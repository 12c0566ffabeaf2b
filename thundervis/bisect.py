"""``thundervis bisect``: which pass of a chain changed the numbers, and which symbol of it.

Every recorded pass of one chain is rebuilt from its validated trace JSON (``Recording.pass_trace``:
the compiler's loader and its allow-list; recorded text is never executed) and run on the same
inputs: the chain's inputs captured by ``run --capture-inputs`` (``<chain>_inputs``), else random
ones of the recorded shapes (with a note). Passes run in the reference interpreter; the last pass
(``codegen``, the trace that executes) runs each fusion as its executor's kernel, regenerated from
the fusion's validated IR like ``thundervis rerun`` does, so a wrong lowering shows there.

A forward/backward chain is bisected from its ``remat`` pass when that pass takes or returns other
values than pass 0 (:func:`_from_remat`): the passes before it hold the other remat policy's split.
Each pass's outputs are compared with pass 0's (the ATen graph; ``max rel``: the largest over the
outputs of max abs difference / max |pass 0|). Whether a pass diverges is judged as ``run
--check-numerics`` judges a kernel (:func:`thundervis.numerics_check.judge`): each output's error
against pass 0 run in float64, relative to pass 0's own float32 error of that output. In the first diverging pass,
the first top-level symbol whose output (by name: passes keep names) diverges from the previous
pass's value is named, with its user source line, module and the kernel it ended in (lineage).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Optional

import torch

from thundervis.compiler.interpreter import run_symbol
from thundervis.compiler.ir import TensorProxy, Trace, flatten
from thundervis.compiler.registry import UnknownSymbol, check_executable
from thundervis.kernel_numerics import errors
from thundervis.numerics_check import judge, output_eps, region_of, verdict
from thundervis.present.units import format_error, plural
from thundervis.rerun import float64_region, random_inputs

COMPILED_CHAINS = ("forward", "backward", "inference")


class BisectError(Exception):
    """A request bisect cannot answer (unknown chain, no inputs, a chain that ran eagerly): one sentence."""


@dataclass(frozen=True)
class PassResult:
    """One pass's outputs against pass 0 (``max_rel``) and against pass 0 in float64 (``ref_rel``)."""

    index: int
    name: str
    max_abs: float
    max_rel: float
    ref_rel: float
    diverged: bool
    note: str = ""

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class DivergingSymbol:
    """The first top-level symbol of a diverging pass whose ``output`` diverges from the previous
    pass's value (``max_rel``; the previous pass's own ``previous_rel``), with its lineage: user
    source line (``file:line``) and code, module path, and the kernel it ended in (None: unknown)."""

    uid: str
    sym: str
    output: str
    max_rel: float
    previous_rel: float
    source: Optional[str]
    code: Optional[str]
    module: Optional[str]
    kernel: Optional[str]
    kernel_executor: Optional[str]


@dataclass(frozen=True)
class Divergence:
    """The first diverging pass and, inside it, the first diverging symbol (None when no single
    symbol's output diverges, only the pass's outputs)."""

    index: int
    pass_name: str
    symbol: Optional[DivergingSymbol] = None

    def as_json(self) -> dict:
        """Return a JSON-able dict: the pass, then the symbol's fields (each None without a symbol)."""
        symbol = asdict(self.symbol) if self.symbol else dict.fromkeys(f.name for f in fields(DivergingSymbol))
        return {"index": self.index, "pass_name": self.pass_name, **symbol}


@dataclass
class BisectReport:
    """What ``bisect`` found for one chain."""

    graph: int
    chain: str
    inputs: str
    eager_rel: float = 0.0
    tolerance: float = 0.0
    passes: list = field(default_factory=list)
    divergence: Optional[Divergence] = None
    notes: list = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"graph": self.graph, "chain": self.chain, "inputs": self.inputs, "eager_rel": self.eager_rel,
                "tolerance": self.tolerance, "passes": [p.as_json() for p in self.passes],
                "divergence": self.divergence.as_json() if self.divergence else None,
                "notes": list(self.notes), "seconds": self.seconds}


# ----------------------------------------------------------------------------------- running

class _KernelRunner:
    """Runs the fusions of a pass as their executor's kernels (regenerated from validated IR),
    built once per fusion uid; falls back to the interpreter (with a note) where it cannot."""

    def __init__(self, notes: list):
        self.notes = notes
        self.cache: dict = {}

    def run(self, b, env: dict) -> None:
        fn = self.cache.get(b.uid)
        if fn is None:
            fn = self.cache[b.uid] = self._build(b)
        if fn is False:
            run_symbol(b, env, expand=True)
            return
        args = [env[p.name] for p in b.args]
        outs = fn(list(args))
        flat = [o for o in flatten(outs) if isinstance(o, torch.Tensor)]
        for p, v in zip(b.flat_outputs(), flat):
            env[p.name] = v

    def _build(self, b):
        from thundervis.rerun import ExecutorMissing, build_runner, get_fusion_executor
        try:
            ex = get_fusion_executor(b.executor or "torch")
            return build_runner(region_of(b), b.sym, ex)
        except (ExecutorMissing, RuntimeError, ValueError) as e:
            self.notes.append(f"{b.sym} ran in the reference interpreter: {str(e).splitlines()[0][:160]}")
            return False


def run_pass(trace: Trace, args: list, kernels: Optional[_KernelRunner] = None) -> dict:
    """Run ``trace`` on ``args`` and return every value it computed (name -> tensor), ``del``
    statements ignored. With ``kernels``, fusions run as kernels instead of their prims."""
    if len(args) != len(trace.inputs):
        raise BisectError(f"the pass takes {len(trace.inputs)} inputs, {len(args)} were given")
    env = {p.name: a for p, a in zip(trace.inputs, args)}
    with torch.no_grad():
        for b in trace.symbols:
            if b.sym == "del":
                continue
            if kernels is not None and b.fusion:
                kernels.run(b, env)
            else:
                run_symbol(b, env, expand=True)
    return env


def _outputs(trace: Trace, env: dict) -> list:
    return [env[p.name] for p in flatten(trace.outputs) if isinstance(p, TensorProxy)]


def _same(a: list, b: list) -> bool:
    """True when two lists of outputs are equal bit for bit (NaN where NaN)."""
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
        if x.is_floating_point() else torch.equal(x, y) for x, y in zip(a, b))


def _rel(a, b) -> float:
    try:
        return errors([a], [b])[1]
    except ValueError:
        return float("inf")


# ----------------------------------------------------------------------------------- inputs

def chain_inputs(rec, graph: int, chain: str, trace: Trace, inputs: Optional[str], seed: int,
                 notes: list) -> tuple[list, str]:
    """Return (input tensors of pass 0, ``captured`` | ``random``). ``inputs`` None: captured when
    recorded, else random with a note; ``captured`` without any: :class:`BisectError`."""
    if inputs not in (None, "captured", "random"):
        raise BisectError(f"unknown inputs {inputs!r}; use captured or random")
    if inputs != "random":
        from thundervis.recording.capture import load_captured_inputs
        metas = [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype, "strides": p.strides}
                 for p in trace.inputs]
        args, why = load_captured_inputs(rec.path, f"{chain}_inputs", graph, chain, metas)
        if args is not None:
            return list(args), "captured"
        if inputs == "captured":
            raise BisectError(f"graph {graph} {chain} has no captured inputs (record them with "
                              "thundervis run --capture-inputs, or use --inputs random)")
        notes.append(f"no captured inputs for graph {graph} {chain}: using random inputs of the recorded shapes")
    try:
        return random_inputs(trace, seed), "random"
    except (RuntimeError, ValueError, TypeError, OverflowError, MemoryError) as e:
        raise BisectError(f"the recorded inputs of graph {graph} {chain} cannot be made ({type(e).__name__})") from None


# ----------------------------------------------------------------------------------- bisect

def _compiled_passes(rec, graph: Optional[int], chain: str) -> tuple:
    """Return ``(graph, chain, traces)``: the chain to bisect and the trace of each of its passes,
    each checked to be executable; raise :class:`BisectError` for a chain that is not compiled, has
    no passes, or holds a pass that is refused."""
    if chain not in COMPILED_CHAINS:
        raise BisectError(f"bisect takes a compiled chain ({', '.join(COMPILED_CHAINS)}), not {chain!r}")
    from thundervis.present.default_view import pick_chain
    g, c = pick_chain(rec.graphs(), graph, chain, rec.path)
    if c.status != "compiled":
        why = f": {c.error.splitlines()[0][:200]}" if c.error else ""
        raise BisectError(f"graph {g.id} {chain} ran eagerly ({c.status}{why}); it has no compiled passes to bisect")
    if not c.passes:
        raise BisectError(f"graph {g.id} {chain} has no recorded passes")
    traces = [rec.pass_trace(p.ref) for p in c.passes]
    for p, trace in zip(c.passes, traces):  # what runs (and what fusions hand the runner) is checked first
        try:
            check_executable(trace)
        except UnknownSymbol as e:
            raise BisectError(f"pass {p.name!r} of graph {g.id} {chain} is refused: {e}") from None
    return g, c, traces


def _signature(trace: Trace) -> tuple:
    """The names, shapes and dtypes a trace takes and returns, in order."""
    def sig(xs):
        return tuple((x.name, tuple(x.shape), x.dtype) for x in xs if isinstance(x, TensorProxy))
    return sig(trace.inputs), sig(flatten(trace.outputs))


def _from_remat(c, traces: list, notes: list) -> tuple:
    """Return (chain, traces) from the ``remat`` pass on when it takes or returns other values than
    pass 0 (the forward/backward split of the other policy comes before it), with a note saying so;
    else both unchanged. Values are matched by name, not shape: the remat pass gives a value the
    name pass 0 gave the same FX node, and a policy that saves another tensor of the same shape
    (the input of a GeLU instead of its output) changes what the chain takes all the same."""
    names = [p.name for p in c.passes]
    if "remat" not in names:
        return c, traces
    k = names.index("remat")
    if k == 0 or _signature(traces[k]) == _signature(traces[0]):
        return c, traces
    notes.append(f"bisected from pass {c.passes[k].index} remat: the passes before it hold the other remat "
                 "policy's split of the joint graph, which takes or returns other values")
    return replace(c, passes=c.passes[k:]), traces[k:]


def bisect(rec, graph: Optional[int] = None, chain: str = "forward", inputs: Optional[str] = None,
           seed: int = 0) -> BisectReport:
    """Bisect one chain of the open recording ``rec``; return a :class:`BisectReport`. Raises
    :class:`BisectError` (one sentence) for requests it cannot answer, ``UnknownItem`` for a graph
    or chain the recording does not hold."""
    t0 = time.perf_counter()
    g, c, traces = _compiled_passes(rec, graph, chain)
    report = BisectReport(graph=g.id, chain=chain, inputs="random")
    c, traces = _from_remat(c, traces, report.notes)
    args, report.inputs = chain_inputs(rec, g.id, chain, traces[0], inputs, seed, report.notes)

    base_env = run_pass(traces[0], [a.clone() for a in args])
    base = _outputs(traces[0], base_env)
    ref_trace = float64_region(traces[0])
    ref_env = run_pass(ref_trace, [a.double() if a.is_floating_point() else a.clone() for a in args])
    ref = _outputs(ref_trace, ref_env)
    report.eager_rel = max((errors([b], [r])[1] for b, r in zip(base, ref)), default=0.0)
    eps = output_eps(base)
    _, _, report.tolerance = verdict(0.0, report.eager_rel, eps)
    kernels = _KernelRunner(report.notes)
    envs = {0: base_env}
    last = len(traces) - 1
    eager_errors = [errors([b], [r]) for b, r in zip(base, ref)]  # pass 0's own, computed once
    prev_outs, prev_result = base, (0.0, 0.0, report.eager_rel, False)
    for i, (p, trace) in enumerate(zip(c.passes, traces)):
        if i == 0:
            report.passes.append(PassResult(p.index, p.name, 0.0, 0.0, report.eager_rel, False))
            continue
        env = run_pass(trace, [a.clone() for a in args], kernels if i == last else None)
        outs = _outputs(trace, env)
        if _same(outs, prev_outs):  # most passes compute bit for bit what the one before did
            max_abs, max_rel, ref_rel, diverged = prev_result
        else:
            try:
                vs_base = [errors([o], [b]) for o, b in zip(outs, base)] if len(outs) == len(base) \
                    else [errors(outs, base)]
                judged = judge(outs, ref, base, eager_errors)
            except ValueError as e:
                raise BisectError(f"pass {p.index} {p.name} of graph {g.id} {chain} returns different outputs ({e})") from None
            max_abs, max_rel = max((a for a, _ in vs_base), default=0.0), max((r for _, r in vs_base), default=0.0)
            ref_rel = judged["max_rel"]
            diverged = judged["verdict"] == "flagged"
        prev_outs, prev_result = outs, (max_abs, max_rel, ref_rel, diverged)
        note = "fusions run as kernels" if i == last and any(b.fusion for b in trace.symbols) else ""
        report.passes.append(PassResult(p.index, p.name, max_abs, max_rel, ref_rel, diverged, note))
        envs[i] = env
        if diverged and report.divergence is None:
            report.divergence = _first_symbol(rec, g.id, chain, c.passes, traces, i, envs, args, eps)
        if report.divergence is None:
            envs.pop(i - 1, None) if i - 1 > 0 else None
    report.seconds = time.perf_counter() - t0
    return report


def _first_symbol(rec, graph, chain, passes, traces, i, envs, args, eps) -> Divergence:
    """Return the first top-level symbol of pass ``i`` whose output diverges from the value the
    same name has in pass ``i - 1`` (judged against pass ``i - 1`` run in float64), with lineage."""
    prev, cur = traces[i - 1], traces[i]
    prev_env = envs.get(i - 1)
    if prev_env is None:
        prev_env = run_pass(prev, [a.clone() for a in args])
    ref_prev = float64_region(prev)
    ref_env = run_pass(ref_prev, [a.double() if a.is_floating_point() else a.clone() for a in args])
    env = envs[i]
    for b in cur.symbols:
        if b.sym == "del":
            continue
        for o in b.flat_outputs():
            if o.name not in ref_env or o.name not in env or o.name not in prev_env:
                continue
            v, r, pv = env[o.name], ref_env[o.name], prev_env[o.name]
            if not isinstance(v, torch.Tensor) or not isinstance(r, torch.Tensor) or v.shape != r.shape:
                continue
            rel, prev_rel = _rel(v, r), _rel(pv, r)
            if verdict(rel, prev_rel, eps)[0] == "flagged":
                return _with_lineage(rec, graph, chain, passes[i], b, o.name, rel, prev_rel)
    return Divergence(passes[i].index, passes[i].name)


def _with_lineage(rec, graph, chain, p, b, output, rel, prev_rel) -> Divergence:
    """Return the :class:`Divergence` of symbol ``b`` of pass ``p`` with its source line, module
    and the kernel it ended in (``Recording.symbol``); a fusion names itself and its lines."""
    from thundervis.recording import UnknownItem
    src = code = module = kernel = kex = None
    try:
        d = rec.symbol(p.ref, b.uid)
    except (UnknownItem, LookupError):
        d = None
    if d is not None:
        if d.source is not None and d.source.file:
            src, code = f"{d.source.file}:{d.source.line}", d.source.code
        module = d.module or None
        if d.kernel is not None:
            kernel, kex = d.kernel.name, d.kernel.executor
    if b.fusion:
        kernel, kex = kernel or b.sym, kex or b.executor
        # The kernel's diverging output names the member op that computes it, and so its line.
        member = next((m for m in b.subsymbols if output in {o.name for o in m.flat_outputs()}), None)
        if member is not None and member.source is not None and member.source.file:
            src, code = f"{member.source.file}:{member.source.line}", member.source.code
            module = member.source.module or module
        if src is None:
            try:
                k = rec.find_kernel(b.sym, graph, chain)
                if k.source_lines:
                    first = k.source_lines[0]
                    src, code = f"{first.get('file')}:{first.get('line')}", first.get("code")
            except LookupError:
                pass
    return Divergence(p.index, p.name,
                      DivergingSymbol(b.uid, b.sym, output, rel, prev_rel, src, code, module, kernel, kex))


# ----------------------------------------------------------------------------------- text

def report_lines(r: BisectReport) -> list[str]:
    """The lines ``thundervis bisect`` prints (recorded strings not yet made visible: callers do)."""
    first = r.passes[0].index if r.passes else 0  # the pass compared against: remat's when it starts there
    lines = [f"bisect graph {r.graph} {r.chain} · {plural(len(r.passes), 'pass', 'passes')} · {r.inputs} inputs · "
             f"pass {first} float32 vs float64: max rel {format_error(r.eager_rel)}"]
    lines += [f"note: {n}" for n in r.notes]
    for p in r.passes:
        mark = "  <- diverges" if p.diverged else ""
        note = f"  ({p.note})" if p.note else ""
        lines.append(f"  {p.index:>2} {p.name:<10} max rel {format_error(p.max_rel)}{note}{mark}")
    d = r.divergence
    if d is None:
        lines.append("no divergence")
        return lines
    lines.append(f"first divergence: pass {d.index} {d.pass_name}")
    s = d.symbol
    if s is None:
        lines.append("  no single symbol's output diverges from the previous pass (the outputs do)")
        return lines
    lines.append(f"  symbol  {s.sym} ({s.uid}) -> {s.output}: max rel {format_error(s.max_rel)} "
                 f"(previous pass {format_error(s.previous_rel)})")
    if s.source:
        lines.append(f"  source  {s.source}  {(s.code or '').strip()}")
    if s.module:
        lines.append(f"  module  {s.module}")
    if s.kernel:
        lines.append(f"  kernel  {s.kernel} [{s.kernel_executor}]")
    return lines
