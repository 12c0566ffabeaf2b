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


def _reference_key(members, outputs, device_kind, phase_limit):
    """The region-wide numbering region_key must agree with (values named by first appearance)."""
    from thundervis.compiler.ir import TensorProxy, map_structure
    names = {}

    def canon(v):
        if isinstance(v, TensorProxy):
            return ("T", names.setdefault(v.name, len(names)), v.shape, v.dtype, v.strides, v.device)
        return v

    def op(b):
        return (b.sym, repr(map_structure(canon, b.args)), repr(map_structure(canon, b.kwargs)),
                repr(map_structure(canon, b.outputs)), tuple(op(s) for s in b.subsymbols))
    return (device_kind, phase_limit, tuple(op(b) for b in members), tuple(canon(p) for p in outputs))


def test_member_texts_distinguish_exactly_what_region_wide_numbering_does():
    import itertools
    import random
    from thundervis.compiler.ir import BoundSymbol, TensorProxy
    rng = random.Random(0)
    pool = [TensorProxy(f"t{i}", (4, 8), "float32", "cpu") for i in range(5)]
    regions = []
    for n in range(300):
        members = []
        for k in range(rng.randint(1, 3)):
            a, b = rng.choice(pool), rng.choice(pool)
            out = TensorProxy(f"o{n}_{k}", (4, 8), "float32", "cpu")
            sub = (BoundSymbol("prims.neg", (a,), {}, out, "s"),) if rng.random() < 0.3 else ()
            members.append(BoundSymbol(rng.choice(["prims.add", "prims.mul"]), (a, b), {"alpha": 1}, out,
                                       f"u{n}_{k}", subsymbols=sub))
        regions.append((members, [members[-1].outputs]))
    for (m1, o1), (m2, o2) in itertools.combinations(regions[:120], 2):
        same = _reference_key(m1, o1, "cpu", 64) == _reference_key(m2, o2, "cpu", 64)
        assert same == (rv.region_key(m1, o1, "cpu", 64) == rv.region_key(m2, o2, "cpu", 64))
    assert len({rv.region_key(m, o, "cpu", 64) for m, o in regions}) < len(regions)  # some do fold
