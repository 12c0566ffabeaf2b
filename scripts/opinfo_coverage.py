"""OpInfo coverage sweep: every float32 CPU OpInfo, compiled with thundervis vs eager.

Usage::

    python scripts/opinfo_coverage.py                 # the whole sweep, default executors (tens of minutes)
    python scripts/opinfo_coverage.py --executors torch      # the compiler core alone
    python scripts/opinfo_coverage.py --ops add,softmax --samples 2
    python scripts/opinfo_coverage.py --limit 50 --json coverage.json

Per op it prints the outcome (lowered to prims / torch fallback / eager fallback / mismatch /
crash / skipped) and the reason, then a summary. Exit status 1 when any op mismatched or crashed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

os.environ.setdefault("TRITON_INTERPRET", "1")

import opinfo_harness as h  # noqa: E402  (scripts/ is on sys.path when this file runs)


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated op names (OpInfo name or name.variant)")
    p.add_argument("--limit", type=int, help="only the first N ops")
    p.add_argument("--samples", type=int, default=2, help="sample inputs per op (default 2)")
    p.add_argument("--no-grad", action="store_true", help="skip gradient checks")
    p.add_argument("--timeout", type=float, default=120, help="seconds per op before it counts as a crash")
    p.add_argument("--executors", default="default",
                   help="comma-separated executors (torch is always added last), or 'default' for the "
                        "device's default order, what users get (default: default)")
    p.add_argument("--remat", choices=("off", "auto"), default="auto",
                   help="the backend's rematerialization policy (default: auto, the backend's default)")
    p.add_argument("--json", metavar="OUT", help="write every result to OUT as JSON")
    p.add_argument("--quiet", action="store_true", help="print only failures and the summary")
    return p.parse_args(argv)


def select_ops(names: str | None, limit: int | None) -> list:
    """Return the OpInfos named in ``names`` (all when None), at most ``limit``."""
    ops = h.op_db()
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        by_id = {}
        for op in ops:
            by_id.setdefault(h.op_id(op), op)
        chosen = []
        for n in wanted:
            hits = [op for op in ops if h.op_id(op) == n] or [op for op in ops if op.name == n]
            if not hits:
                raise SystemExit(f"no float32 CPU OpInfo named {n!r}")
            chosen.extend(hits)
        ops = chosen
    return ops[:limit] if limit else ops


def summarize(results: list) -> dict:
    """Return the summary counts of a list of OpResult."""
    c = Counter(r.status for r in results)
    tried = len(results) - c[h.SKIPPED]
    compiled_ok = c[h.LOWERED] + c[h.TORCH_FALLBACK]
    return {
        "tried": tried, "skipped": c[h.SKIPPED],
        "matching": compiled_ok + c[h.EAGER_FALLBACK],
        "compiled_and_matching": compiled_ok,
        "lowered": c[h.LOWERED], "lowered_pct": round(100.0 * c[h.LOWERED] / tried, 1) if tried else 0.0,
        "torch_fallback": c[h.TORCH_FALLBACK], "eager_fallback": c[h.EAGER_FALLBACK],
        "fell_back": c[h.TORCH_FALLBACK] + c[h.EAGER_FALLBACK],
        "mismatch": c[h.MISMATCH], "crash": c[h.CRASH], "failed": c[h.MISMATCH] + c[h.CRASH],
    }


def main(argv=None) -> int:
    """Run the sweep; return 1 when any op mismatched or crashed, else 0."""
    args = _parse(argv)
    ops = select_ops(args.ops, args.limit)
    executors = None if args.executors == "default" else tuple(e for e in args.executors.split(",") if e)
    results = []
    t0 = time.perf_counter()
    from thundervis.compiler.pipeline import resolve_executors
    try:
        names = [e.name for e in resolve_executors(executors, h.DEVICE)]
    except KeyError as e:
        print(f"opinfo_coverage: {e.args[0]}", file=sys.stderr)
        return 2
    print(f"executors: {', '.join(names)}{' (the device default)' if executors is None else ''}", flush=True)
    width = max((len(h.op_id(o)) for o in ops), default=10)
    print(f"{'op':<{width}}  {'outcome':<15}  {'s':>5}  reason", flush=True)
    for op in ops:
        r = h.check_op(op, samples=args.samples, grads=not args.no_grad, timeout=args.timeout, remat=args.remat,
                       executors=executors)
        results.append(r)
        if not args.quiet or r.status in h.FAILURES:
            tag = r.status + ("*" if r.random else "")
            print(f"{r.op:<{width}}  {tag:<15}  {r.seconds:5.1f}  {r.reason}", flush=True)
    s = summarize(results)
    print(f"\n(* random op: shapes and dtypes compared only)   total {time.perf_counter() - t0:.0f} s")
    print(f"ops tried: {s['tried']}  (skipped: {s['skipped']})")
    print(f"matching: {s['matching']}  (compiled and matching: {s['compiled_and_matching']})")
    print(f"lowered to prims: {s['lowered']}  ({s['lowered_pct']}%)")
    print(f"fell back: {s['fell_back']}  (some ops on torch: {s['torch_fallback']}, whole op eager: {s['eager_fallback']})")
    print(f"failed: {s['failed']}  (mismatch: {s['mismatch']}, crash: {s['crash']})")
    reasons = Counter(n.split(":")[0] + ": " + n.split(": ", 1)[-1][:90] for r in results for n in r.not_lowered)
    if reasons:
        print("\nmost common unlowered ATen ops:")
        for text, n in reasons.most_common(15):
            print(f"  {n:4d}  {text}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": s, "results": [r.to_dict() for r in results]}, f, indent=1)
    return 1 if s["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
