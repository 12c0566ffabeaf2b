"""present.fallback_groups: the ops left to torch grouped by reason, sizes folded where they differ."""
from __future__ import annotations

from thundervis.present.fallback_groups import OpGroup, torch_op_groups


def test_reasons_equal_but_for_sizes_are_one_group_largest_first():
    ops = [("aten.mean.dim", "reduces dims [1] of a [16, 7, 32] tensor", "/x/a.py:3"),
           ("aten.mean.dim", "reduces dims [1] of a [4, 7, 32] tensor", "/x/a.py:5"),
           ("aten.sum.dim_IntList", "reduces dims [1] of a [2, 7, 32] tensor", None),
           ("aten.mm", "matmuls stay with torch", "b.py:9")]
    groups = torch_op_groups(ops)
    assert [g.count for g in groups] == [3, 1]
    first = groups[0]
    assert first.reason == "reduces dims [1] of a […] tensor"  # [1] is the same in all three: kept
    assert first.ops == ("mean.dim", "sum.dim_IntList") and first.sources == "a.py:3, 5"  # op_name: no aten.
    assert groups[1] == OpGroup("matmuls stay with torch", 1, ("mm",), "b.py:9")
    assert groups[1].as_json() == {"reason": "matmuls stay with torch", "count": 1, "ops": ["mm"], "sources": "b.py:9"}
    assert torch_op_groups([]) == []


def test_equal_counts_order_by_reason():
    groups = torch_op_groups([("aten.b", "zeta", None), ("aten.a", "alpha", None)])
    assert [g.reason for g in groups] == ["alpha", "zeta"] and groups[0].sources == ""
