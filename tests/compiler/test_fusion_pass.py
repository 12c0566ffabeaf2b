"""The ``fuse`` pass: regions on dataflow, no cycles, reasons for what was not fused, deterministic
names, build failures going back to torch, and the kernel records it leaves for the pipeline."""
from __future__ import annotations

import os

import pytest
import torch

from thundervis.compiler.executors.base import FusionExecutor
from thundervis.compiler.executors.triton_executor import TritonExecutor
from thundervis.compiler.fusion_stats import is_fusion
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes.fuse import fuse
from thundervis.compiler.serialize import trace_from_dict


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))


def P(name, shape=(4, 8), dtype="float32"):
    strides = tuple(int(torch.empty(shape).stride(i)) for i in range(len(shape)))
    return TensorProxy(name, tuple(shape), dtype, "cpu", strides)


def S(uid, sym, args, out, executor="triton", aten=None, line=None):
    from thundervis.compiler.ir import SourceInfo
    return BoundSymbol(sym=sym, args=tuple(args), kwargs={}, outputs=out, uid=uid, executor=executor,
                       aten=aten or {"prims.exp": "aten.exp.default", "prims.add": "aten.add.Tensor",
                                     "prims.mul": "aten.mul.Tensor", "prims.mm": "aten.mm.default",
                                     "prims.neg": "aten.neg.default", "prims.tanh": "aten.tanh.default"}[sym],
                       source=SourceInfo("model.py", line, f"line {line}") if line else None)


def diamond() -> Trace:
    """a = exp(x); b = mm(a, w) [torch]; c = add(a, b): fusing a with c would need b inside."""
    x, w = P("x", (4, 4)), P("w", (4, 4))
    a, b, c, d = P("a", (4, 4)), P("b", (4, 4)), P("c", (4, 4)), P("d", (4, 4))
    syms = (S("f0", "prims.exp", [x], a, line=1), S("f1", "prims.mm", [a, w], b, executor="torch", line=2),
            S("f2", "prims.add", [a, b], c, line=3), S("f3", "prims.tanh", [c], d, line=3))
    return Trace("forward", (x, w), syms, (d,), chain="forward", pass_name="claim", next_uid=4, next_name=0)


def test_diamond_does_not_fuse_around_a_torch_op():
    t = diamond()
    out = fuse(t, TritonExecutor())
    names = [b.sym for b in out.symbols]
    assert names == ["triton_fusion_0", "prims.mm", "triton_fusion_1"]
    first, mm, second = out.symbols
    assert [s.uid for s in first.subsymbols] == ["f0"]
    assert [s.uid for s in second.subsymbols] == ["f2", "f3"]
    assert "cycle" in second.note and "f1 (prims.mm)" in second.note
    assert "cycle" in first.note  # both sides of the refused edge say why
    # the fused trace still computes the same values
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    ref = run_trace(t, [x, w])[0]
    torch.testing.assert_close(run_trace(out, [x, w])[0], ref)


def test_no_topological_violation_and_input_not_mutated():
    t = diamond()
    before = t.symbols
    out = fuse(t, TritonExecutor())
    assert t.symbols == before
    defined = {p.name for p in out.inputs}
    for b in out.symbols:
        assert all(p.name in defined for p in b.flat_inputs())
        defined.update(p.name for p in b.flat_outputs())


def test_refusal_reason_from_executor_is_recorded():
    # a row reduction over [4, 8] and a pointwise op on a [3, 5] tensor cannot share a kernel
    x, y = P("x", (4, 8)), P("y", (3, 5))
    r, z = P("r", (4,)), P("z", (3, 5))
    syms = (BoundSymbol("prims.sum", (x, [1]), {}, r, "f0", executor="triton", aten="aten.sum.dim_IntList"),
            BoundSymbol("prims.exp", (y,), {}, z, "f1", executor="triton", aten="aten.exp.default"),
            BoundSymbol("prims.mul", (z, 2.0), {}, P("o", (3, 5)), "f2", executor="triton", aten="aten.mul.Tensor"))
    t = Trace("forward", (x, y), syms, (r, syms[2].outputs), next_uid=3)
    out = fuse(t, TritonExecutor())
    assert [b.sym for b in out.symbols] == ["triton_fusion_0", "triton_fusion_1"]
    assert len(out.symbols[1].subsymbols) == 2


def test_executor_refusal_is_noted_on_both_regions():
    # the [4, 8] row mean read against a [8, 4] result (transposed) does not follow the kernel rows
    x = P("x", (4, 8))
    m, mv, xt, o = P("m", (4, 1)), P("mv", (1, 4)), P("xt", (8, 4)), P("o", (8, 4))
    syms = (BoundSymbol("prims.sum", (x, [1], True), {}, m, "f0", executor="triton", aten="aten.sum.dim_IntList"),
            BoundSymbol("prims.view", (m, [1, 4]), {}, mv, "f1", executor="triton", aten="aten.view.default"),
            BoundSymbol("prims.permute", (x, [1, 0]), {}, xt, "f2", executor="triton", aten="aten.permute.default"),
            BoundSymbol("prims.add", (xt, mv), {}, o, "f3", executor="triton", aten="aten.add.Tensor"))
    t = Trace("forward", (x,), syms, (o,), next_uid=4)
    out = fuse(t, TritonExecutor())
    fusions = [b for b in out.symbols if is_fusion(b)]
    assert len(fusions) == 2
    notes = " ".join(b.note or "" for b in fusions)
    assert "not fused with" in notes and "row" in notes
    x_val = torch.randn(4, 8)
    torch.testing.assert_close(run_trace(out, [x_val])[0], run_trace(t, [x_val])[0])


class _Breaks(TritonExecutor):
    def build_kernel(self, fusion):
        raise RuntimeError("no compiler today")


def test_build_failure_goes_back_to_torch_with_the_reason():
    out = fuse(diamond(), _Breaks())
    assert not any(is_fusion(b) for b in out.symbols)
    assert [b.executor for b in out.symbols] == ["torch"] * 4
    assert "kernel build failed" in out.symbols[0].note and "no compiler today" in out.symbols[0].note
    assert out.meta["kernels"] == []


def test_views_only_region_stays_in_torch_with_a_note():
    x = P("x", (4, 8))
    v = P("v", (8, 4))
    syms = (BoundSymbol("prims.permute", (x, [1, 0]), {}, v, "f0", executor="triton", aten="aten.permute.default"),
            BoundSymbol("prims.mm", (v, x), {}, P("o", (8, 8)), "f1", executor="torch", aten="aten.mm.default"))
    out = fuse(Trace("forward", (x,), syms, (syms[1].outputs,), next_uid=2), TritonExecutor())
    assert out.symbols[0].executor == "torch" and "views only" in out.symbols[0].note


def test_kernel_records_and_names_are_deterministic(tmp_path):
    a = fuse(diamond(), TritonExecutor())
    b = fuse(diamond(), TritonExecutor())
    ra, rb = a.meta["kernels"], b.meta["kernels"]
    assert [r["name"] for r in ra] == ["triton_fusion_0", "triton_fusion_1"]
    assert [(r["name"], r["members"], r["code"]) for r in ra] == [(r["name"], r["members"], r["code"]) for r in rb]
    rec = ra[1]
    assert rec["executor"] == "triton" and rec["pass"] == "fuse" and rec["language"] == "python"
    assert rec["ops"] == ["prims.add", "prims.tanh"] and rec["uid"] == a.symbols[2].uid
    assert rec["inputs"][0]["shape"] == [4, 4] and rec["outputs"][0]["name"] == "d"
    assert rec["source_lines"] == [{"file": "model.py", "line": 3, "code": "line 3", "module": "",
                                    "direction": "forward"}]
    assert "@triton.jit" in rec["code"] and rec["note"]
    assert os.path.isfile(rec["cache_path"]) and rec["cache_path"].startswith(str(tmp_path))
    # the recorded region trace rebuilds and runs on its own
    region = trace_from_dict(rec["trace"])
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(run_trace(region, [x, y])[0], torch.tanh(x + y))


def test_backward_kernels_mark_their_lines_as_backward():
    t = diamond().replace(chain="backward")
    recs = fuse(t, TritonExecutor()).meta["kernels"]
    assert {line["direction"] for r in recs for line in r["source_lines"]} == {"backward"}


def test_fusion_executor_default_pass():
    assert [n for n, _ in TritonExecutor().passes()] == ["fuse"]
    assert FusionExecutor.fuses
