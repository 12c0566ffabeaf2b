"""Repeated layers fold: a kernel's source is generated once per distinct region, and each region
gets it with its own op listing."""
from __future__ import annotations

from thundervis.compiler.executors import generated_once as go
from thundervis.compiler.executors.triton_plan import generate
from thundervis.compiler.ir import BoundSymbol, TensorProxy


def _reset():
    with go._lock:
        go._memo.clear()
        go.stats.update(asked=0, generated=0)


def _region(names: tuple, shape=(4, 8)):
    """Return (members, outputs) of ``sum(x * y, dim=1)`` with values called ``names``."""
    x, y, m, s = (TensorProxy(n, shape, "float32", "cpu") if i < 3 else
                  TensorProxy(n, shape[:1], "float32", "cpu") for i, n in enumerate(names))
    members = [BoundSymbol("prims.mul", (x, y), {}, m, f"u_{names[2]}", aten="aten.mul.Tensor"),
               BoundSymbol("prims.sum", (m, [1]), {}, s, f"u_{names[3]}", aten="aten.sum.dim_IntList")]
    return members, [s]


def _header(source: str) -> list[str]:
    return [line for line in source.splitlines() if line.startswith("#   ")]


def test_equal_regions_generate_once_with_their_own_listing():
    _reset()
    one = generate(*_region(("a1", "b1", "m1", "s1")), "cpu")
    two = generate(*_region(("a2", "b2", "m2", "s2")), "cpu")
    assert go.stats == {"asked": 2, "generated": 1}
    assert _header(one.source) == ["#   m1 = prims.mul(a1, b1)", "#   s1 = prims.sum(m1, [1])"]
    assert _header(two.source) == ["#   m2 = prims.mul(a2, b2)", "#   s2 = prims.sum(m2, [1])"]
    assert go.REGION_OPS not in two.source and two.listed == ()
    # everything but the listing is the same text, and the jitted part is identical
    assert [x for x in one.source.splitlines() if not x.startswith("#   ")] == \
           [x for x in two.source.splitlines() if not x.startswith("#   ")]
    assert one.jit_source == two.jit_source and one.jit_lines == two.jit_lines


def test_other_shapes_generate_again():
    _reset()
    generate(*_region(("a1", "b1", "m1", "s1")), "cpu")
    wide = generate(*_region(("a2", "b2", "m2", "s2"), (4, 16)), "cpu")
    assert go.stats["generated"] == 2 and "16" in wide.jit_source


def test_derived_names_follow_their_base():
    rename = go._renamer({"t5": "t9", "primals_1": "primals_7"})
    assert rename(TensorProxy("t5_moved", (2,), "float32", "cpu")).name == "t9_moved"
    assert rename(TensorProxy("primals_1_kept", (2,), "float32", "cpu")).name == "primals_7_kept"
    assert rename(TensorProxy("t55", (2,), "float32", "cpu")).name == "t55"  # not a prefix match
