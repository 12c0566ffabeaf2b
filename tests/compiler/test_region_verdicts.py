"""Repeated layers fold: whether a region generates is planned once per distinct region."""
from __future__ import annotations

import torch
import torch.nn as nn

from thundervis.compiler.backend import plan_records
from thundervis.compiler.executors import region_verdicts as rv


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def _fold(layers: int) -> tuple[int, int, int]:
    """Return (regions asked, regions planned, kernels built) for a model of ``layers`` blocks."""
    with rv._lock:
        rv._memo.clear()
        rv.stats.update(asked=0, planned=0)
    with torch.device("meta"):
        model = nn.Sequential(*[Block(32) for _ in range(layers)])
        x = torch.randn(4, 32, requires_grad=True)

    def step(compile):
        compile(model)(x).sum().backward()
    records, failures = plan_records(step)
    assert failures == []
    return rv.stats["asked"], rv.stats["planned"], len(records)


def test_layers_fold_into_one_plan_per_distinct_region():
    asked3, planned3, built3 = _fold(3)
    asked6, planned6, built6 = _fold(6)
    assert asked6 > asked3 and built6 > built3  # every layer still gets its kernels
    assert planned6 == planned3  # but the three extra layers plan nothing new


def test_names_do_not_matter_but_shapes_do():
    from thundervis.compiler.ir import BoundSymbol, TensorProxy
    a, b = TensorProxy("t1", (4, 8), "float32", "cpu"), TensorProxy("t2", (4, 8), "float32", "cpu")
    c = TensorProxy("t9", (4, 8), "float32", "cpu")
    d, e = TensorProxy("t7", (4, 8), "float32", "cpu"), TensorProxy("t8", (4, 8), "float32", "cpu")
    one = [BoundSymbol("prims.add", (a, b), {}, c, "u1")]
    two = [BoundSymbol("prims.add", (d, e), {}, TensorProxy("t3", (4, 8), "float32", "cpu"), "u5")]
    wide = [BoundSymbol("prims.add", (a, b), {}, TensorProxy("t3", (4, 9), "float32", "cpu"), "u5")]
    same = [BoundSymbol("prims.add", (a, a), {}, c, "u1")]
    key = rv.region_key(one, [c], "cuda", 64)
    assert key == rv.region_key(two, [two[0].outputs], "cuda", 64)
    assert key != rv.region_key(wide, [wide[0].outputs], "cuda", 64)
    assert key != rv.region_key(same, [c], "cuda", 64)  # x + x is not x + y
