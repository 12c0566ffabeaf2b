"""How ``thundervis diff --side-by-side`` scales (issue 22 F7: over 60 s on a 100k-op pass).

Synthetic chains of N ops where every 7th op changes; the diff is aligned once per size, then laid
out side by side as plain text (``side_by_side_plain``, what ``--plain`` and pipes print) and as a
styled Rich Text (``side_by_side_text``, what a terminal gets). Prints the time per row at each size
and, as the baseline measured in the same run, the old layout (a Rich Table, which measures every
cell of every row) at the smallest size. Targets: time per row within 2x from the smallest to the
largest size (linear), and the plain layout at least 10x faster per row than the Rich Table.

Run: ``python benchmarks/diff_side_by_side.py [--sizes 1000 10000 100000]``.
"""
from __future__ import annotations

import argparse
import io
import sys
import time

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
from thundervis.diff import diff_traces
from thundervis.diff.render import side_by_side_plain, side_by_side_rich, side_by_side_text
from thundervis.safe_text import plain_console


def chain(n: int, changed: bool) -> Trace:
    """Return a trace of ``n`` unary ops (every 7th one different when ``changed``)."""
    a = TensorProxy("a", (4,), "float32", "cpu", (1,))
    prev, syms = a, []
    for i in range(n):
        t = TensorProxy(f"t{i}", (4,), "float32", "cpu", (1,))
        sym = "prims.exp" if changed and i % 7 == 0 else "prims.neg"
        syms.append(BoundSymbol(sym, (prev,), {}, t, f"u{i}",
                                source=SourceInfo(file="m.py", line=i % 50 + 1, code="x = f(x)", module="l")))
        prev = t
    return Trace("forward", (a,), tuple(syms), (prev,), chain="forward", graph=0, pass_name="p")


def timed(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    args = ap.parse_args()
    per_row = {}
    for n in args.sizes:
        d = diff_traces(chain(n, False), chain(n, True))
        rows = len(side_by_side_plain(d, 3, 200).splitlines())
        plain = timed(lambda: side_by_side_plain(d, 3, 200))
        styled = timed(lambda: side_by_side_text(d, 3, 200))
        per_row[n] = plain / rows
        print(f"{n:>7} ops {rows:>7} rows  plain {plain:7.3f} s ({plain / rows * 1e6:6.1f} µs/row)  "
              f"styled {styled:7.3f} s ({styled / rows * 1e6:6.1f} µs/row)")
    small = min(args.sizes)
    d = diff_traces(chain(small, False), chain(small, True))
    rows = len(side_by_side_plain(d, 3, 200).splitlines())
    table = timed(lambda: plain_console(file=io.StringIO(), width=200, no_color=True,
                                        force_terminal=False).print(side_by_side_rich(d, 3)))
    print(f"baseline: Rich Table at {small} ops {table:.3f} s ({table / rows * 1e6:.1f} µs/row)")
    growth = per_row[max(args.sizes)] / per_row[small]
    speedup = (table / rows) / per_row[small]
    print(f"time per row, largest vs smallest: {growth:.2f}x (target <= 2x); "
          f"plain vs Rich Table: {speedup:.1f}x faster (target >= 10x)")
    return 0 if growth <= 2 and speedup >= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
