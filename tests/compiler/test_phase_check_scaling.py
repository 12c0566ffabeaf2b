"""Growing a region that runs as phases costs a number of built parts linear in its ops: the phase
planner's question "does the current phase plus this member still generate?" is answered once per
grown phase (:mod:`thundervis.compiler.executors.part_checks`), not rebuilt for every member of
every merge. Counted (parts built, their members), not timed, so the test is exact on a loaded
machine."""
from __future__ import annotations

import math

import pytest

from thundervis.compiler.executors import part_checks, region_verdicts
from thundervis.compiler.executors.triton_executor import TritonExecutor
from thundervis.compiler.executors.triton_phase_plan import PhasePlan
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes.fuse import fuse

ATEN = {"prims.sum": "aten.sum.dim_IntList", "prims.view": "aten.view.default", "prims.permute": "aten.permute.default",
        "prims.add": "aten.add.Tensor", "prims.tanh": "aten.tanh.default", "prims.exp": "aten.exp.default",
        "prims.mul": "aten.mul.Tensor"}


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))


def P(name, shape):
    strides = tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
    return TensorProxy(name, tuple(shape), "float32", "cpu", strides)


def row_mean_then_chain(n: int) -> Trace:
    """A row sum read transposed (so the region runs as two phases), then ``n`` pointwise ops that
    the second phase grows by, one merge at a time."""
    x = P("x", (4, 8))
    m, mv, xt, h = P("m", (4, 1)), P("mv", (1, 4)), P("xt", (8, 4)), P("h0", (8, 4))
    syms = [BoundSymbol("prims.sum", (x, [1], True), {}, m, "f0"), BoundSymbol("prims.view", (m, [1, 4]), {}, mv, "f1"),
            BoundSymbol("prims.permute", (x, [1, 0]), {}, xt, "f2"), BoundSymbol("prims.add", (xt, mv), {}, h, "f3")]
    for k in range(n):
        out = P(f"h{k + 1}", (8, 4))
        sym, args = [("prims.tanh", (h,)), ("prims.exp", (h,)), ("prims.mul", (h, 0.5))][k % 3]
        syms.append(BoundSymbol(sym, args, {}, out, f"f{4 + k}"))
        h = out
    syms = tuple(b.replace(executor="triton", aten=ATEN[b.sym]) for b in syms)
    return Trace("forward", (x,), syms, (h,), chain="forward", pass_name="claim", next_uid=len(syms), next_name=0)


def _built(n: int) -> tuple[int, int]:
    part_checks._memo.clear()
    part_checks._steps.clear()
    region_verdicts._memo.clear()
    part_checks.stats.update(built=0, ops=0)
    out = fuse(row_mean_then_chain(n), TritonExecutor())
    assert [k.details["plan"] for k in out.kernels] == ["phases"]  # one region, grown to n + 4 ops
    return part_checks.stats["built"], part_checks.stats["ops"]


def test_growing_a_phased_region_builds_parts_linear_in_its_ops():
    small_parts, small_ops = _built(20)
    large_parts, large_ops = _built(80)
    assert small_parts > 20  # every merge asked
    # 4x the ops: about 4x the parts built (rebuilt per member per merge, it was ~16x), and about
    # 16x their members (a grown part is still built whole; it was ~64x)
    assert large_parts <= 4.5 * small_parts, (small_parts, large_parts)
    assert large_ops <= 18 * small_ops, (small_ops, large_ops)


def test_grown_phases_answer_as_fits_does():
    t = row_mean_then_chain(12)
    members = list(t.symbols)
    plan = PhasePlan(members, [members[-1].outputs, members[0].outputs], "cpu")
    grower = part_checks.GrowingPart(plan)
    for start in range(len(members)):
        g = part_checks.GrowingPart.EMPTY
        for i in range(start, len(members)):
            g = grower.grow(g, i)
            own = list(range(start, i + 1))
            assert list(g.closure) == plan.closure(own)
            assert grower.generates(g) == plan.fits(own), (start, i)
