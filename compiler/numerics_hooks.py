"""Run-time numerics hooks for the first K calls of a compiled chain (``run --check-numerics`` and
``run --compare-eager``); after K calls they are gone and the plain callable runs.

The compiler only calls and reports: what a check computes is the ``checker`` the caller puts in
``ProfileSettings`` (``thundervis.numerics_check`` for ``thundervis run``), called with the fusion
symbol (its region: ``args`` -> ``subsymbols`` -> ``outputs``), the tensors the kernel was given,
what it returned, the chain's decomposed ATen symbols (what the region's prims came from) and, when
the launcher can prove it, the generated function that returned those outputs for those inputs. Its
JSON-able results go to ``observer.runtime(graph, chain, "numerics", [data, ...])``, once per chain
call (one list of the call's kernels).
``--compare-eager`` runs the chain's ATen graph eagerly on the same inputs as the compiled call and
reports the output deltas (``"eager_compare"``). A failing check is reported as such and never
breaks the user's training.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from .ir import BoundSymbol


def checked_plan(plan: tuple, checker: Callable, report: Callable[[str, Any], None],
                 parents: Optional[dict] = None) -> tuple:
    """Return ``((namespace, calls), flush)``: codegen's plan ``(namespace, calls)`` with each
    fusion's callable wrapped so that, after it returns, ``checker(symbol, inputs, outputs,
    parents, made_by)`` runs (``parents``: the chain's decomposed ATen symbols, ``claim.DECOMPOSED``;
    ``made_by``: the generated region function that returned ``outputs`` for these ``inputs``
    when the launcher witnessed it, ``CpuRegion.run_witnessed``, else None),
    and ``flush()``, which reports the results gathered since the last flush as one ``numerics``
    event (a list of results: one transaction for a whole chain call, not one per kernel; see
    :func:`flushed_after`). The kernels themselves are shared, not rebuilt."""
    namespace, calls = plan
    ns = dict(namespace)
    pending: list = []
    for b, callee in calls:
        if callee is not None and b.fusion:
            ns[callee] = _checked(b, namespace[callee], checker, pending.append, parents or {})

    def flush() -> None:
        if pending:
            rows = list(pending)
            pending.clear()
            report("numerics", rows)
    return (ns, calls), flush


def flushed_after(fn: Callable, flush: Callable[[], None]) -> Callable:
    """Return the boxed callable ``fn`` calling ``flush()`` after each call, returned or raised."""
    def run(args):
        try:
            return fn(args)
        finally:
            flush()
    run._boxed_call = True
    return run


def _checked(b: BoundSymbol, fn: Callable, checker: Callable, keep: Callable[[dict], None],
             parents: dict) -> Callable:
    # A launcher that can say which generated function returned its outputs (the CPU path's
    # CpuRegion.run_witnessed) is called through that: the checker need not run it again.
    witnessed = getattr(fn, "run_witnessed", None)

    def run(*args, **kwargs):
        if witnessed is not None and not kwargs:
            out, made_by = witnessed(*args)
        else:
            out, made_by = fn(*args, **kwargs), None
        try:
            data = checker(b, args, out, parents, made_by)
        except Exception as e:  # a check that fails is a result, never a broken training step
            data = {"kernel": b.sym, "uid": b.uid, "executor": b.executor, "verdict": "error",
                    "detail": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        if data is not None:
            keep(data)
        return out
    return run


def flat_tensors(x) -> list:
    """Return the tensors of ``x`` (a tensor, or tuples and lists of them nested), in order;
    anything else is left out."""
    if isinstance(x, torch.Tensor):
        return [x]
    out: list = []
    if isinstance(x, (tuple, list)):
        for v in x:  # a flat tuple of tensors, the usual case, without a call per item
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, (tuple, list)):
                out += flat_tensors(v)
    return out


def output_deltas(outs, eager_outs) -> dict:
    """Return ``{"max_abs": .., "max_rel": .., "outputs": [{"index", "max_abs", "max_rel"}]}``: the
    differences between the compiled and the eager outputs (rel: divided by the largest |eager|)."""
    a, b = flat_tensors(outs), flat_tensors(eager_outs)
    rows, max_abs, max_rel = [], 0.0, 0.0
    if len(a) != len(b):
        return {"max_abs": float("inf"), "max_rel": float("inf"), "outputs": [],
                "detail": f"{len(a)} outputs, eager has {len(b)}"}
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            rows.append({"index": i, "max_abs": float("inf"), "max_rel": float("inf")})
            max_abs = max_rel = float("inf")
            continue
        if not x.numel() or not (x.is_floating_point() or y.is_floating_point()):
            d = 0.0 if torch.equal(x.cpu(), y.cpu()) else float("inf")
            rows.append({"index": i, "max_abs": d, "max_rel": d})
            max_abs, max_rel = max(max_abs, d), max(max_rel, d)
            continue
        x64, y64 = x.detach().to("cpu", torch.float64), y.detach().to("cpu", torch.float64)
        same = (x64 == y64) | (x64.isnan() & y64.isnan())
        diff = torch.nan_to_num(torch.where(same, torch.zeros_like(x64), (x64 - y64).abs()),
                                nan=float("inf"), posinf=float("inf"))
        d = float(diff.max())
        finite = y64[torch.isfinite(y64)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        r = d / scale if scale > 0 else d
        rows.append({"index": i, "max_abs": d, "max_rel": r})
        max_abs, max_rel = max(max_abs, d), max(max_rel, r)
    return {"max_abs": max_abs, "max_rel": max_rel, "outputs": rows}


def compared_with_eager(fn: Callable, eager: Callable, steps: int, report: Callable[[str, Any], None]) -> Callable:
    """Return a boxed callable running ``fn``; for its first ``steps`` calls the eager ATen graph
    ``eager`` also runs on the same inputs and the deltas are reported (``"eager_compare"``: call
    number and :func:`output_deltas`). Later calls go straight to ``fn``."""
    state = {"calls": 0}

    def run(args):
        n = state["calls"]
        if n >= steps:
            return fn(args)
        state["calls"] = n + 1
        saved = list(args)
        out = fn(args)
        try:
            with torch.no_grad():
                ref = eager(list(saved))
            data = {"call": n, **output_deltas(out, ref)}
        except Exception as e:  # the comparison is best effort
            data = {"call": n, "max_abs": None, "max_rel": None, "outputs": [],
                    "detail": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        del saved
        report("eager_compare", data)
        return out
    run._boxed_call = True
    if hasattr(fn, "state"):
        run.state = fn.state
    return run


def reporter(observer, graph: int, chain: str) -> Callable[[str, Any], None]:
    """Return ``report(event, data)`` sending a runtime event of ``chain``; a failing observer is
    ignored (recording is best effort)."""
    def report(event: str, data: Any) -> None:
        try:
            observer.runtime(graph, chain, event, data)
        except Exception:
            pass
    return report

