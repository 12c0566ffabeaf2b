"""The ``fuse`` pass does work linear in the trace: its cycle checks and reorderings visit a number
of regions that grows with the trace's length, not with its square. Counted (``_Graph.steps``), not
timed, so the test is exact on a loaded machine."""
from __future__ import annotations

from typing import Optional

from thundervis.compiler.executors.base import BuiltKernel, FusionExecutor
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes import fuse as fuse_pass


class SmallRegions(FusionExecutor):
    """Fuses anything, but at most ``limit`` symbols a region: many regions stay apart, so many
    merges are tried and refused, as in a real trace (the codegen cost is left out)."""

    name = "small"

    def __init__(self, limit: int = 3):
        self.limit = limit

    def region_problem(self, members: list[BoundSymbol], outputs: Optional[list] = None) -> Optional[str]:
        return None if len(members) <= self.limit else f"more than {self.limit} symbols"

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        return BuiltKernel("", "python")


def residual_stream(layers: int) -> Trace:
    """``layers`` blocks of h = h + tanh(exp(h) * w): every block reads the stream twice, so each
    value has a consumer past the one being merged (the shape that made the search quadratic)."""
    def P(name):
        return TensorProxy(name, (4, 8), "float32", "cpu", (8, 1))
    w, h = P("w"), P("h0")
    syms, n = [], 0
    for i in range(layers):
        e, m, t, out = P(f"e{i}"), P(f"m{i}"), P(f"t{i}"), P(f"h{i + 1}")
        for sym, args, res in (("prims.exp", (h,), e), ("prims.mul", (e, w), m), ("prims.tanh", (m,), t),
                               ("prims.add", (h, t), out)):
            syms.append(BoundSymbol(sym=sym, args=args, kwargs={}, outputs=res, uid=f"f{n}", executor="small"))
            n += 1
        h = out
    return Trace("forward", (P("h0"), w), tuple(syms), (h,), chain="forward", pass_name="claim",
                 next_uid=n, next_name=0)


def _steps(layers: int) -> tuple[int, int]:
    g, _, refused = fuse_pass._form_regions(residual_stream(layers), SmallRegions())
    return g.steps, len(refused)


def test_fuse_search_grows_linearly_with_the_trace():
    small, refused_small = _steps(100)
    large, refused_large = _steps(400)
    assert refused_small > 80 and refused_large > 4 * 80  # merges were refused: regions stayed apart
    assert small > 0
    # 4x the symbols: about 4x the steps (the unbounded search this replaced did ~13x here in time).
    assert large <= 4.5 * small, (small, large)


def test_fuse_result_on_the_residual_stream_is_a_valid_order():
    out = fuse_pass.fuse(residual_stream(20), SmallRegions())
    defined = {"h0", "w"}
    for b in out.symbols:
        assert all(p.name in defined for p in b.flat_inputs())
        defined.update(p.name for p in b.flat_outputs())
    assert sum(len(b.subsymbols) or 1 for b in out.symbols) == 80


class Picky(SmallRegions):
    """Refuses a deterministic pseudo-random third of the regions, so the graph keeps odd shapes."""

    def region_problem(self, members, outputs=None):
        if sum(int(b.uid[1:]) * 7919 for b in members) % 3 == 0:
            return "picky"
        return super().region_problem(members, outputs)


def random_dag(n: int, seed: int) -> Trace:
    """``n`` binary/unary ops, each reading one or two random earlier values."""
    import random
    rng = random.Random(seed)

    def P(name):
        return TensorProxy(name, (4,), "float32", "cpu", (1,))
    values, syms = [P("x")], []
    for i in range(n):
        args = tuple(rng.choice(values[max(0, len(values) - 12):] if rng.random() < 0.8 else values)
                     for _ in range(rng.choice((1, 2))))
        out = P(f"v{i}")
        syms.append(BoundSymbol(sym="prims.add" if len(args) == 2 else "prims.exp", args=args, kwargs={},
                                outputs=out, uid=f"f{i}", executor="small"))
        values.append(out)
    return Trace("forward", (values[0],), tuple(syms), tuple(values[-3:]), chain="forward",
                 pass_name="claim", next_uid=n, next_name=0)


def _reaches(g, a: int, b: int) -> bool:
    stack, seen = [a], set()
    while stack:
        n = stack.pop()
        for s in g.succ[n]:
            if s == b:
                return True
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return False


def test_region_order_stays_topological_and_searches_stay_exact():
    for seed in range(12):
        g, _, _ = fuse_pass._form_regions(random_dag(60, seed), Picky(limit=5))
        nodes = list(g.succ)
        assert len({g.ord[n] for n in nodes}) == len(nodes)
        for u in nodes:
            assert all(g.ord[u] < g.ord[v] for v in g.succ[u])
        for a in nodes:  # a detour exists exactly when some successor other than b reaches b
            for b in nodes:
                if a != b:
                    expect = any(s != b and _reaches(g, s, b) for s in g.succ[a])
                    assert (g.has_detour(a, b) is not None) == expect, (seed, a, b)


def _read_outside(trace: Trace, members: list[int]) -> list:
    """The region's outputs by definition: values it makes that a symbol outside it reads or the trace returns."""
    outside = {p.name for j, b in enumerate(trace.symbols) if j not in members for p in b.flat_inputs()}
    outside |= {p.name for p in trace.flat_outputs()}
    made = {p.name: p for i in members for p in trace.symbols[i].flat_outputs()}
    return [p for n, p in made.items() if n in outside]


def test_region_outputs_from_kept_lists_are_the_values_read_outside():
    trace = residual_stream(6)
    uses = fuse_pass._uses(trace)
    outs = [b.flat_outputs() for b in trace.symbols]
    n = len(trace.symbols)
    cases = ([0], [0, 1], [1, 2, 3], [3, 4], list(range(n)), [2, 5, 9, 17], [n - 1])
    assert any(_read_outside(trace, m) != outs[m[-1]] for m in cases)  # some region hides a value it makes
    for members in cases:
        expect = _read_outside(trace, members)
        assert fuse_pass._region_outputs(outs, members, uses) == expect
        assert fuse_pass._region_io(trace, members, uses)[1] == expect
