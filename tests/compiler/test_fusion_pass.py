"""The ``fuse`` pass: regions on dataflow, no cycles, reasons for what was not fused, deterministic
names, build failures going back to torch, and the kernel records it leaves for the pipeline."""
from __future__ import annotations

import json
import os

import pytest
import torch

from thundervis.compiler.executors.base import FusionExecutor
from thundervis.compiler.executors.triton_executor import TritonExecutor
from thundervis.compiler.fusion_stats import is_fusion
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes.fuse import fuse
from thundervis.compiler.serialize import kernel_from_dict, kernel_to_dict, trace_from_dict


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
    assert names == ["fw_fusion_0", "prims.mm", "fw_fusion_1"]
    first, mm, second = out.symbols
    assert first.fusion and second.fusion and not mm.fusion
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


def _single_kernels_only() -> TritonExecutor:
    """A Triton executor that refuses multi-phase (single-program) kernels, as for large tensors."""
    ex = TritonExecutor()
    ex.phase_limit = 0
    return ex


def test_independent_regions_are_fused_side_by_side():
    # a row reduction over [4, 8] and a pointwise chain on a [3, 5] tensor share no value: one
    # kernel with two sections (horizontal fusion), at any size
    x, y = P("x", (4, 8)), P("y", (3, 5))
    r, z = P("r", (4,)), P("z", (3, 5))
    syms = (BoundSymbol("prims.sum", (x, [1]), {}, r, "f0", executor="triton", aten="aten.sum.dim_IntList"),
            BoundSymbol("prims.exp", (y,), {}, z, "f1", executor="triton", aten="aten.exp.default"),
            BoundSymbol("prims.mul", (z, 2.0), {}, P("o", (3, 5)), "f2", executor="triton", aten="aten.mul.Tensor"))
    t = Trace("forward", (x, y), syms, (r, syms[2].outputs), next_uid=3)
    out = fuse(t, _single_kernels_only())
    assert [b.sym for b in out.symbols] == ["fw_fusion_0"]
    assert [s.uid for s in out.symbols[0].subsymbols] == ["f0", "f1", "f2"]
    (record,) = out.kernels
    assert record.details["plan"] == "sections" and record.details["parts"] == 2
    xv, yv = torch.randn(4, 8), torch.randn(3, 5)
    for a, b in zip(_run_kernels(out, _single_kernels_only(), [xv, yv]), run_trace(t, [xv, yv])):
        torch.testing.assert_close(a, b)


def test_executor_refusal_is_noted_on_both_regions():
    # the [4, 8] row mean read against a [8, 4] result (transposed) does not follow the kernel rows;
    # without single-program phases (large tensors) the two stay separate kernels, with the reason
    x = P("x", (4, 8))
    m, mv, xt, o = P("m", (4, 1)), P("mv", (1, 4)), P("xt", (8, 4)), P("o", (8, 4))
    syms = (BoundSymbol("prims.sum", (x, [1], True), {}, m, "f0", executor="triton", aten="aten.sum.dim_IntList"),
            BoundSymbol("prims.view", (m, [1, 4]), {}, mv, "f1", executor="triton", aten="aten.view.default"),
            BoundSymbol("prims.permute", (x, [1, 0]), {}, xt, "f2", executor="triton", aten="aten.permute.default"),
            BoundSymbol("prims.add", (xt, mv), {}, o, "f3", executor="triton", aten="aten.add.Tensor"))
    t = Trace("forward", (x,), syms, (o,), next_uid=4)
    out = fuse(t, _single_kernels_only())
    fusions = [b for b in out.symbols if is_fusion(b)]
    assert len(fusions) == 2
    notes = " ".join(b.note or "" for b in fusions)
    assert "not fused with" in notes and "row" in notes
    x_val = torch.randn(4, 8)
    torch.testing.assert_close(run_trace(out, [x_val])[0], run_trace(t, [x_val])[0])
    # small enough for one program: one kernel whose phases pass the row mean through memory
    out = fuse(t, TritonExecutor())
    (fusion,) = [b for b in out.symbols if is_fusion(b)]
    assert out.kernels[0].details["plan"] == "phases"
    from thundervis.compiler.executors.triton_executor import TritonExecutor as T
    ex = T()
    ex.build_kernel(fusion)
    torch.testing.assert_close(ex.callable_for(fusion)(x_val)[0], run_trace(t, [x_val])[0])


class _Breaks(TritonExecutor):
    def build_kernel(self, fusion):
        raise RuntimeError("no compiler today")


def test_build_failure_goes_back_to_torch_with_the_reason():
    out = fuse(diamond(), _Breaks())
    assert not any(is_fusion(b) for b in out.symbols)
    assert [b.executor for b in out.symbols] == ["torch"] * 4
    assert "kernel build failed" in out.symbols[0].note and "no compiler today" in out.symbols[0].note
    assert out.kernels == ()


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
    ra, rb = a.kernels, b.kernels
    assert [r.name for r in ra] == ["fw_fusion_0", "fw_fusion_1"]
    assert [(r.name, r.members, r.code) for r in ra] == [(r.name, r.members, r.code) for r in rb]
    record = ra[1]
    assert record.executor == "triton" and record.pass_name == "fuse" and record.language == "python"
    assert record.region is not None and record.region.symbols == a.symbols[2].subsymbols
    # the JSON the recording stores
    rec = kernel_to_dict(record)
    assert kernel_from_dict(json.loads(json.dumps(rec))) == record
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
    out = fuse(t, TritonExecutor())
    assert {line.direction for r in out.kernels for line in r.source_lines} == {"backward"}
    # named apart from the forward kernels, and per graph, so a name is unique in a recording
    assert [r.name for r in out.kernels] == ["bw_fusion_0", "bw_fusion_1"]
    assert [r.name for r in fuse(diamond().replace(graph=2), TritonExecutor()).kernels] == \
        ["g2_fw_fusion_0", "g2_fw_fusion_1"]


def test_second_fusion_executor_goes_on_numbering():
    once = fuse(diamond(), TritonExecutor())
    # a later fuse pass (another fusion executor) finds the first one's fusions and numbers after them
    again = fuse(once.replace(symbols=once.symbols[:2] + (once.symbols[2].subsymbols[0].replace(executor="triton"),
                                                        once.symbols[2].subsymbols[1].replace(executor="triton"))),
                 TritonExecutor())
    fusions = [b for b in again.symbols if b.fusion]
    assert [b.sym for b in fusions] == ["fw_fusion_0", "fw_fusion_1"]
    assert fusions[0] is once.symbols[0]  # an existing fusion is never a member of a new one


def test_pipeline_runs_one_fuse_pass_per_fusion_executor():
    from thundervis.compiler.pipeline import chain_passes
    from thundervis.compiler.executors.torch_executor import TorchExecutor
    names = [n for n, _ in chain_passes([TritonExecutor(), TorchExecutor()])]
    assert names == ["decompose", "cse", "simplify", "dce", "claim", "fuse", "liveness"]
    assert [n for n, _ in chain_passes([TorchExecutor()])].count("fuse") == 0
    assert FusionExecutor.fuses


def _random_program(seed: int) -> Trace:
    """A random dataflow program on [4, 4] values: Triton pointwise ops, row and column sums and torch
    matmuls, so regions can only merge where no path through a torch op would make a cycle."""
    import random
    rng = random.Random(seed)
    xs = [P(f"x{i}", (4, 4)) for i in range(3)]
    values, syms = list(xs), []
    for k in range(14):
        out = P(f"v{k}", (4, 4))
        kind = rng.choice(["neg", "tanh", "add", "mul", "mm", "mm", "rowsum", "colsum"])
        a, b = rng.choice(values[-6:]), rng.choice(values)
        if kind == "mm":
            syms.append(S(f"f{k}", "prims.mm", [a, b], out, executor="torch"))
        elif kind in ("rowsum", "colsum"):  # inner / outer reductions cannot share one domain
            r = P(f"r{k}", (4, 1) if kind == "rowsum" else (1, 4))
            syms.append(BoundSymbol("prims.sum", (a, [1 if kind == "rowsum" else 0], True), {}, r, f"g{k}",
                                    executor="triton", aten="aten.sum.dim_IntList"))
            syms.append(S(f"f{k}", "prims.add", [b, r], out))
        else:
            op = {"neg": "prims.neg", "tanh": "prims.tanh", "add": "prims.add", "mul": "prims.mul"}[kind]
            syms.append(S(f"f{k}", op, [a, b] if kind in ("add", "mul") else [a], out))
        values.append(out)
    outs = tuple(dict.fromkeys(values[-3:] + [values[5]]))
    return Trace("forward", tuple(xs), tuple(syms), outs, chain="forward", pass_name="claim",
                 next_uid=100, next_name=0)


def _run_kernels(trace: Trace, ex: TritonExecutor, args: list) -> list:
    """Run ``trace`` with each fusion launched as its generated Triton kernel."""
    env = {p.name: a for p, a in zip(trace.inputs, args)}
    for b in trace.symbols:
        vals = [env[p.name] if isinstance(p, TensorProxy) else p for p in b.args]
        if is_fusion(b):
            res = ex.callable_for(b)(*vals)
            env.update({p.name: r for p, r in zip(b.outputs, res)})
        else:
            env[b.outputs.name] = run_trace(Trace("one", tuple(p for p in b.args if isinstance(p, TensorProxy)),
                                                  (b,), (b.outputs,)), [v for v in vals if torch.is_tensor(v)])[0]
    return [env[p.name] for p in trace.outputs]


@pytest.mark.parametrize("phases", [True, False], ids=["phases", "sections-only"])
def test_random_programs_fuse_without_cycles_and_compute_the_same(phases):
    merged_sideways = 0
    for seed in range(12):
        t = _random_program(seed)
        ex = TritonExecutor() if phases else _single_kernels_only()
        out = fuse(t, ex)
        defined = {p.name for p in out.inputs}
        for b in out.symbols:  # a valid order: every value is made before it is read
            assert all(p.name in defined for p in b.flat_inputs()), (seed, b.sym)
            defined.update(p.name for p in b.flat_outputs())
        members = [s.uid for b in out.symbols for s in (b.subsymbols if is_fusion(b) else (b,))]
        assert sorted(members) == sorted(b.uid for b in t.symbols)  # each op exactly once
        merged_sideways += sum(r.details.get("plan") in ("sections", "phases") for r in out.kernels)
        args = [torch.randn(4, 4) * 0.5 for _ in t.inputs]
        want = run_trace(t, args)
        for got, ref in zip(_run_kernels(out, ex, args), want):
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5 * (1 + float(ref.abs().max())))
    assert merged_sideways > 0  # the programs do exercise multi-part kernels


def test_pipeline_reports_the_fuse_pass_then_its_kernel_records():
    from thundervis.compiler.observer import CompileObserver
    from thundervis.compiler.pipeline import CompileOptions, PassRunner
    events = []

    class Events(CompileObserver):
        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            events.append(("pass", name, trace.kernels))

        def kernels_built(self, graph, chain, kernels):
            events.append(("kernels", [(type(k).__name__, k.name) for k in kernels]))
    out = PassRunner(0, "forward", CompileOptions(observer=Events()), start=1).run(
        "fuse", lambda t: fuse(t, TritonExecutor()), diamond())
    assert events == [("pass", "fuse", ()),
                      ("kernels", [("KernelRecord", "fw_fusion_0"), ("KernelRecord", "fw_fusion_1")])]
    assert out.kernels == ()  # the records leave the trace once reported
