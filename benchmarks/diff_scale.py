"""How the pass diff scales: synthetic traces of 1k, 10k and 100k symbols.

The "after" trace is what a pass could make of the "before" trace: most symbols are the same
objects (a pass keeps what it does not touch), 5% get renamed arguments (as after CSE), 2% are
removed (DCE), 2% are replaced by two new symbols pointing back through ``origin`` (decompose),
12% are fused four at a time into fusion symbols, and a ``del`` follows every 20th symbol
(liveness). Prints, per size, the alignment time, the time per symbol, and the time to render the
whole diff as text, then checks the targets: 100k symbols aligned in under 1 s, and time per
symbol within 2x from 1k to 100k.

How time per symbol is measured: every size diffs about 100k symbols in all (a hundred 1k pairs,
ten 10k pairs, one 100k pair), each pair once per round, so that no diff finds its traces still in
the CPU cache from having just diffed them. That is the case a user meets (a trace read from a
recording), and it keeps the comparison between sizes like for like: diffing one 1k pair over and
over keeps its ~0.5 MB in the L2 cache, which no 100k diff can have. That "hot" figure is printed
too, for reference. Times are CPU time, best of ``--repeat`` rounds, which other processes on a
busy machine disturb less than wall time.

Run: ``python benchmarks/diff_scale.py [--sizes 1000 10000 100000] [--repeat 3]``.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
from thundervis.diff import diff_traces
from thundervis.diff.render import unified_plain

_OPS = ("prims.add", "prims.mul", "prims.sub", "prims.tanh", "prims.exp", "prims.div")


def synthetic_pair(n: int, seed: int = 0) -> tuple[Trace, Trace]:
    """Return (before, after) traces of about ``n`` symbols related as described above."""
    rng = random.Random(seed)
    shape = (8, 64)
    x = TensorProxy("x", shape, "float32", "cpu")
    w = TensorProxy("w", shape, "float32", "cpu")
    proxies = [x, w]
    before = []
    for i in range(n):
        op = _OPS[i % len(_OPS)]
        a = proxies[-1]
        b = proxies[rng.randrange(max(0, len(proxies) - 8), len(proxies))]
        out = TensorProxy(f"t{i}", shape, "float32", "cpu")
        args = (a,) if op in ("prims.tanh", "prims.exp") else (a, b)
        src = SourceInfo("model.py", 10 + i % 200, "y = f(x)", f"model.layers.{i // 500}")
        before.append(BoundSymbol(op, args, {}, out, uid=f"f{i}", source=src))
        proxies.append(out)
    a_trace = Trace("forward", (x, w), tuple(before), (proxies[-1],), pass_name="claim", next_uid=n,
                    next_name=n)

    after: list[BoundSymbol] = []
    next_uid = n
    fusions = 0
    i = 0
    while i < n:
        b = before[i]
        r = rng.random()
        if r < 0.12 and i + 4 < n - 1:
            members = tuple(before[i:i + 4])
            outs = (members[-1].outputs,)
            after.append(BoundSymbol(f"fw_fusion_{fusions}", members[0].args, {}, outs, uid=f"f{next_uid}",
                                     origin=tuple(m.uid for m in members), subsymbols=members,
                                     executor="triton", fusion=True))
            fusions += 1
            next_uid += 1
            i += 4
            continue
        if r < 0.17:  # renamed arguments: a new object with other proxy names
            after.append(b.replace(args=tuple(TensorProxy(p.name + "_r", p.shape, p.dtype, p.device)
                                              for p in b.args)))
        elif r < 0.19 and i < n - 1:  # removed
            pass
        elif r < 0.21:  # replaced by two new symbols
            mid = TensorProxy(f"u{i}", shape, "float32", "cpu")
            after.append(BoundSymbol("prims.neg", b.args[:1], {}, mid, uid=f"f{next_uid}", origin=(b.uid,)))
            after.append(BoundSymbol("prims.neg", (mid,), {}, b.outputs, uid=f"f{next_uid + 1}", origin=(b.uid,)))
            next_uid += 2
        else:
            after.append(b)
        if i % 20 == 19:
            after.append(BoundSymbol("del", (b.outputs,), {}, None, uid=f"f{next_uid}"))
            next_uid += 1
        i += 1
    b_trace = a_trace.replace(symbols=tuple(after), pass_name="fuse", next_uid=next_uid)
    return a_trace, b_trace


def measure(n: int, repeat: int, total: int = 100_000) -> dict:
    """Return, for size ``n``: the best-of-``repeat`` CPU time per symbol over ``total // n``
    distinct pairs diffed once each (``cold``), the same for one pair diffed again and again
    (``hot``), and the wall times of aligning and of rendering one pair."""
    pairs = [synthetic_pair(n, seed=k) for k in range(max(1, total // n))]
    best_cold = best_hot = best_align = best_render = float("inf")
    summary = ""
    for _ in range(repeat):
        cpu = 0.0
        for a, b in pairs:
            c0 = time.process_time()
            d = diff_traces(a, b)
            cpu += time.process_time() - c0
            del d
        best_cold = min(best_cold, cpu / len(pairs))
    a, b = pairs[0]
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        d = diff_traces(a, b)
        t1, c1 = time.perf_counter(), time.process_time()
        unified_plain(d)
        t2 = time.perf_counter()
        best_align = min(best_align, t1 - t0)
        best_hot = min(best_hot, c1 - c0)
        best_render = min(best_render, t2 - t1)
        summary = d.summary()
        del d
    return {"n": n, "pairs": len(pairs), "align_s": best_align, "cpu_s": best_cold,
            "per_symbol_us": best_cold / n * 1e6, "hot_per_symbol_us": best_hot / n * 1e6,
            "render_s": best_render, "summary": summary}


def main(argv=None) -> int:
    """Run the benchmark; return 0 when the targets are met, 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = [measure(n, args.repeat) for n in args.sizes]
    print(f"{'symbols':>9} {'pairs':>5} {'align wall':>11} {'align cpu':>10} {'cpu/symbol':>11} "
          f"{'(hot)':>8} {'render text':>12}  result")
    for r in rows:
        print(f"{r['n']:>9} {r['pairs']:>5} {r['align_s'] * 1e3:>9.1f}ms {r['cpu_s'] * 1e3:>8.1f}ms "
              f"{r['per_symbol_us']:>9.2f}µs {r['hot_per_symbol_us']:>6.2f}µs {r['render_s'] * 1e3:>10.1f}ms  "
              f"{r['summary']}")
    ok = True
    big = [r for r in rows if r["n"] >= 100000]
    if big and big[-1]["cpu_s"] >= 1.0:
        print(f"FAIL: {big[-1]['n']} symbols took {big[-1]['cpu_s']:.2f} s of CPU (target < 1 s)")
        ok = False
    per = [r["per_symbol_us"] for r in rows]
    if len(per) > 1:
        spread = max(per) / min(per)
        hot = [r["hot_per_symbol_us"] for r in rows]
        print(f"time per symbol: max/min = {spread:.2f} (target <= 2); "
              f"one pair diffed again and again (cache-hot): {max(hot) / min(hot):.2f}")
        if spread > 2:
            ok = False
            print("FAIL: time per symbol is not flat")
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
