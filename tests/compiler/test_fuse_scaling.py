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
