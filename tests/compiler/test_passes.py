"""Each pass on its own: decompose, cse, dce, claim, liveness, codegen; and the debug-mode checks."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler.check import TraceCheckError, check_names, check_trace
from thundervis.compiler.executors import get_executor, register_executor
from thundervis.compiler.executors.base import Executor
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes.claim import claim
from thundervis.compiler.passes.codegen import CodegenError, codegen
from thundervis.compiler.passes.cse import cse
from thundervis.compiler.passes.dce import dce
from thundervis.compiler.passes.decompose import decompose
from thundervis.compiler.passes.liveness import insert_dels
from thundervis.compiler.passes.simplify import simplify
from thundervis.compiler.prims import prim_for
from thundervis.compiler.resolve import resolve_overload, resolve_symbol


def P(name, shape=(4,), dtype="float32"):
    return TensorProxy(name, tuple(shape), dtype, "cpu", None)


def S(sym, args, out, uid, aten=None, **kw):
    return BoundSymbol(sym=sym, args=tuple(args), kwargs=kw.pop("kwargs", {}), outputs=out, uid=uid,
                       aten=aten, **kw)


def T(inputs, symbols, outputs, next_uid=100, next_name=100):
    return Trace(name="forward", inputs=tuple(inputs), symbols=tuple(symbols), outputs=tuple(outputs),
                 chain="forward", next_uid=next_uid, next_name=next_name)


def _symbols(trace):
    return {b.uid: b for b in trace.symbols}


# ------------------------------------------------------------------------------------ decompose

@pytest.fixture(scope="module")
def mlp_forward(mlp_run):
    return mlp_run.recorder.traces("forward")


def test_decompose_renames_prims_and_keeps_uids(mlp_forward):
    before, after = mlp_forward["acquire"], decompose(mlp_forward["acquire"])
    assert [b.uid for b in after.symbols] == [b.uid for b in before.symbols]
    assert [b.outputs for b in after.symbols] == [b.outputs for b in before.symbols]
    renamed = [(a, b) for a, b in zip(before.symbols, after.symbols) if b.sym.startswith("prims.")]
    assert renamed
    for a, b in renamed:
        assert b.aten == a.sym and not b.subsymbols
        assert b.sym == "prims." + prim_for(resolve_overload(a.sym)).name
    assert after.symbols is not before.symbols and before.pass_name == "acquire"  # input untouched


def test_lowering_gives_subsymbols_pointing_at_their_parent(mlp_forward):
    after = decompose(mlp_forward["acquire"])
    lowered = [b for b in after.symbols if b.subsymbols]
    assert any(b.sym == "aten.native_layer_norm.default" for b in lowered)
    top_uids = {b.uid for b in after.symbols}
    sub_uids = [s.uid for b in lowered for s in b.subsymbols]
    assert len(set(sub_uids)) == len(sub_uids) and not top_uids & set(sub_uids)
    for b in lowered:
        assert b.note is None and b.aten == b.sym
        for s in b.subsymbols:
            assert s.sym.startswith("prims.") and s.origin == (b.uid,)
            assert s.source == b.source and s.seq_nr == b.seq_nr
        # the subsymbols define the parent's outputs under the same names
        defined = {p.name for s in b.subsymbols for p in s.flat_outputs()}
        assert {p.name for p in b.flat_outputs()} <= defined
    check_trace(after)


def test_decompose_leaves_unlowerable_op_with_its_reason():
    x = P("x", (3, 5))
    vals, idx = P("t0", (3, 5)), P("t1", (3, 5), "int64")
    trace = T([x], [S("aten.sort.default", [x, -1], (vals, idx), "f0")], [vals, idx], next_uid=1, next_name=2)
    (b,) = decompose(trace).symbols
    assert b.sym == "aten.sort.default" and not b.subsymbols
    assert b.note.startswith("not lowered: ")
    (c,) = claim(decompose(trace), [get_executor("torch")]).symbols
    assert c.executor == "torch" and c.note == b.note


def test_decompose_records_unknown_aten_names():
    x = P("x")
    trace = T([x], [S("aten.no_such_op.default", [x], P("t0"), "f0")], [P("t0")])
    (b,) = decompose(trace).symbols
    assert b.note.startswith("not lowered: ")


# ------------------------------------------------------------------------------------------ cse

def _cse_trace():
    x = P("x")
    return T([x], [
        S("prims.sin", [x], P("a"), "f0", aten="aten.sin.default"),
        S("prims.sin", [x], P("b"), "f1", aten="aten.sin.default"),
        S("prims.add", [P("a"), P("b")], P("c"), "f2", aten="aten.add.Tensor"),
        S("prims.mul", [P("b"), 2.0], P("d"), "f3", aten="aten.mul.Tensor"),
        S("prims.rand", [[4]], P("r0"), "f4", aten="aten.rand.default"),
        S("prims.rand", [[4]], P("r1"), "f5", aten="aten.rand.default"),
        S("aten.native_dropout.default", [P("c"), 0.5, True], (P("m0"), P("k0", dtype="bool")), "f6"),
        S("aten.native_dropout.default", [P("c"), 0.5, True], (P("m1"), P("k1", dtype="bool")), "f7"),
    ], [P("c"), P("d"), P("r0"), P("r1"), P("m0"), P("m1")])


def test_cse_merges_duplicates_with_origin_of_both():
    before = _cse_trace()
    after = cse(before)
    syms = _symbols(after)
    assert "f1" not in syms
    assert syms["f0"].origin == ("f0", "f1")
    assert syms["f2"].args == (P("a"), P("a"))
    assert syms["f3"].args[0] == P("a")
    x = torch.randn(4)
    torch.testing.assert_close(run_trace(after, [x])[:2], run_trace(before, [x])[:2])


def test_cse_never_merges_random_ops():
    after = cse(_cse_trace())
    assert {"f4", "f5", "f6", "f7"} <= set(_symbols(after))
    assert after.outputs[2:] == (P("r0"), P("r1"), P("m0"), P("m1"))


def test_cse_without_duplicates_changes_nothing():
    trace = cse(_cse_trace())
    assert cse(trace) == trace


# ------------------------------------------------------------------------------------------ dce

def test_dce_drops_dead_symbols_and_keeps_what_outputs_need():
    x = P("x")
    trace = T([x], [
        S("prims.sin", [x], P("a"), "f0"),
        S("prims.cos", [x], P("dead1"), "f1"),
        S("prims.exp", [P("dead1")], P("dead2"), "f2"),
        S("prims.neg", [P("a")], P("b"), "f3"),
    ], [P("b")])
    after = dce(trace)
    assert [b.uid for b in after.symbols] == ["f0", "f3"]
    x_val = torch.randn(4)
    torch.testing.assert_close(run_trace(after, [x_val]), run_trace(trace, [x_val]))


def test_dce_keeps_multi_output_symbols_with_one_live_output():
    x = P("x", (3, 5))
    trace = T([x], [S("aten.sort.default", [x, -1], (P("v", (3, 5)), P("i", (3, 5), "int64")), "f0")],
              [P("v", (3, 5))])
    assert dce(trace) == trace


# ---------------------------------------------------------------------------------------- claim

class FakeFusion(Executor):
    """A fusion executor that wants pointwise add/mul/sub prims and nothing else."""

    name = "fakefuse"
    fuses = True
    WANTS = {"prims.add", "prims.mul", "prims.sub"}

    def can_run(self, b):
        return b.sym in self.WANTS

    def why_not(self, b):
        return f"fakefuse only runs {sorted(self.WANTS)}"

    def callable_for(self, b):
        return resolve_symbol(b.sym)


register_executor(FakeFusion.name, FakeFusion)


# ------------------------------------------------------------------------------------ simplify

def _identities_trace() -> Trace:
    """x * 1, (x * 1) / 1 - 0 as float, an addmm-like parent with mul(bias, 1) inside, and look-alikes
    that are not identities (add of 0, mul by 1 that promotes, mul by 2)."""
    x, b, i = P("x", (2, 3)), P("b", (3,)), P("i", (2, 3), "int64")
    a, c, d, e, f = P("a", (2, 3)), P("c", (2, 3)), P("d", (2, 3)), P("e", (2, 3)), P("f", (2, 3))
    g, h, k, m, bias1 = P("g", (2, 3)), P("h", (2, 3)), P("k", (2, 3)), P("m", (2, 3)), P("bias1", (3,))
    parent = S("aten.add.Tensor", [x, b], m, "f8", subsymbols=(
        S("prims.mul", [b, 1], bias1, "f9", aten="aten.mul.Tensor"),
        S("prims.add", [x, bias1], m, "f10", aten="aten.add.Tensor")))
    syms = [S("prims.mul", [x, 1], a, "f0", aten="aten.mul.Tensor"),
            S("prims.div", [a, 1.0], c, "f1", aten="aten.div.Tensor"),
            S("prims.sub", [c, 0], d, "f2", aten="aten.sub.Tensor"),
            S("prims.convert_element_type", [d], e, "f3", aten="aten._to_copy.default", kwargs={"dtype": torch.float32}),
            S("prims.view", [e, [2, 3]], f, "f4", aten="aten.view.default"),
            S("prims.add", [f, 0], g, "f5", aten="aten.add.Tensor"),  # -0.0 + 0 is +0.0: kept
            S("prims.mul", [i, 1.0], P("h", (2, 3)), "f6", aten="aten.mul.Tensor"),  # promotes: kept
            S("prims.mul", [g, 2], k, "f7", aten="aten.mul.Tensor"),
            parent]
    return T([x, b, i], syms, [k, h, m, a])


def test_simplify_removes_identities_and_rewires_readers():
    t = _identities_trace()
    out = simplify(t)
    syms = _symbols(out)
    assert set(syms) == {"f0", "f5", "f6", "f7", "f8"}  # f0 stays: its value is returned
    assert syms["f5"].args[0].name == "a"  # add reads x * 1 directly, through the removed chain
    assert [s.uid for s in syms["f8"].subsymbols] == ["f10"]
    assert syms["f8"].subsymbols[0].args[1].name == "b"
    for uid in ("f0", "f6", "f7"):
        assert syms[uid] is _symbols(t)[uid]  # untouched symbols keep identity, uid and names
    args = [torch.tensor([[-0.0, 1.5, -2.0], [3.0, float("nan"), 0.25]]), torch.randn(3), torch.arange(6).view(2, 3)]
    for got, want in zip(run_trace(out, args), run_trace(t, args)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.equal(torch.signbit(run_trace(out, args)[0]), torch.signbit(run_trace(t, args)[0]))


def test_simplify_keeps_values_the_trace_or_a_parent_returns():
    x, y = P("x", (4,)), P("y", (4,))
    t = T([x], [S("prims.mul", [x, 1], y, "f0", aten="aten.mul.Tensor")], [y])
    assert simplify(t) is t
    parent = S("aten.mul.Tensor", [x, 1], y, "f1", subsymbols=(S("prims.mul", [x, 1], y, "f2", aten="aten.mul.Tensor"),))
    z = P("z", (4,))
    t2 = T([x], [parent, S("prims.exp", [y], z, "f3", aten="aten.exp.default")], [z])
    assert [s.uid for s in simplify(t2).symbols[0].subsymbols] == ["f2"]


def test_simplify_in_the_pipeline_removes_the_addmm_bias_identities(mlp_run):
    traces = mlp_run.recorder.traces("forward")
    assert "simplify" in traces
    muls_by_one = [s for b in traces["simplify"].walk() for s in [b]
                   if s.sym == "prims.mul" and len(s.args) == 2 and s.args[1] == 1]
    assert not muls_by_one
    before = [s for b in traces["cse"].walk() for s in [b] if s.sym == "prims.mul" and s.args[1:] == (1,)]
    assert before, "the fixture's addmm decomposition should contain mul(x, 1)"


def test_claim_with_torch_only_assigns_torch_and_flattens_nothing(mlp_forward):
    before = mlp_forward["dce"]
    after = claim(before, [get_executor("torch")])
    assert [b.uid for b in after.symbols] == [b.uid for b in before.symbols]
    assert all(b.executor == "torch" for b in after.symbols)
    assert [b.subsymbols for b in after.symbols] == [b.subsymbols for b in before.symbols]


def test_claim_flattens_only_where_a_fusion_executor_wants_prims(mlp_forward, mlp_run):
    before = mlp_forward["dce"]
    executors = [get_executor("fakefuse"), get_executor("torch")]
    after = claim(before, executors)
    by_uid = _symbols(after)
    for b in before.symbols:
        wants_some = any(s.sym in FakeFusion.WANTS for s in b.subsymbols)
        if b.sym in FakeFusion.WANTS:
            assert by_uid[b.uid].executor == "fakefuse"
        elif wants_some:  # replaced by its prims, each with the first executor that runs it
            assert b.uid not in by_uid
            for s in b.subsymbols:
                got = by_uid[s.uid]
                assert got.origin == (b.uid,)
                assert got.executor == ("fakefuse" if s.sym in FakeFusion.WANTS else "torch")
        else:  # kept whole, run by torch, with the reason the fusion executor refused it
            assert by_uid[b.uid].executor == "torch" and by_uid[b.uid].subsymbols == b.subsymbols
            assert "fakefuse only runs" in by_uid[b.uid].note
    assert any(b.executor == "fakefuse" for b in after.symbols)
    check_names(after)
    # the flattened trace still computes the same thing
    gm, inputs = mlp_run.capture.case("forward")
    _, fn = codegen(insert_dels(after), executors)
    with torch.no_grad():
        want = gm(*[a.clone() for a in inputs])
        got = fn([a.clone() for a in inputs])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------- liveness

@pytest.mark.parametrize("chain", ["forward", "backward"])
def test_liveness_deletes_after_last_use_and_never_outputs(mlp_run, chain):
    before = mlp_run.recorder.traces(chain)["claim"]
    after = insert_dels(before)
    outputs = {p.name for p in after.flat_outputs()}
    deleted_at = {}
    for i, b in enumerate(after.symbols):
        if b.sym == "del":
            assert i > 0 and after.symbols[i - 1].sym != "del"
            for p in b.args:
                assert p.name not in deleted_at, f"{p.name} deleted twice"
                deleted_at[p.name] = i
    assert deleted_at and not outputs & set(deleted_at)
    for i, b in enumerate(after.symbols):
        for p in b.flat_inputs() if b.sym != "del" else ():
            assert deleted_at.get(p.name, len(after.symbols)) > i, f"{p.name} read after its del"
    # everything read and not returned is freed, right after its last reader
    read = {p.name for b in after.symbols if b.sym != "del" for p in b.flat_inputs()}
    assert read - outputs <= set(deleted_at)
    for name, i in deleted_at.items():
        last_reader = max(j for j, b in enumerate(after.symbols[:i])
                          if b.sym != "del" and name in {p.name for p in b.flat_inputs() + b.flat_outputs()})
        assert all(b.sym == "del" for b in after.symbols[last_reader + 1:i + 1])
    assert [b for b in after.symbols if b.sym != "del"] == list(before.symbols)
    check_names(after)


def test_liveness_is_idempotent(mlp_run):
    once = insert_dels(mlp_run.recorder.traces("forward")["claim"])
    twice = insert_dels(once)  # old dels are dropped and placed again (with fresh uids)
    assert [(b.sym, b.args, b.outputs) for b in twice.symbols] == [(b.sym, b.args, b.outputs) for b in once.symbols]


# -------------------------------------------------------------------------------------- codegen

def test_codegen_source_runs_and_names_each_executor_call():
    x, y = P("x"), P("y")
    trace = insert_dels(claim(T([x, y], [
        S("prims.mul", [x, y], P("a"), "f0", aten="aten.mul.Tensor"),
        S("prims.sin", [P("a")], P("b"), "f1", aten="aten.sin.default"),
    ], [P("b")]), [get_executor("torch")]))
    final, fn = codegen(trace, [get_executor("torch")])
    src = final.meta["python"]
    assert src.splitlines()[0] == "def forward(args):"
    assert "del x, y" in src and "return (b,)" in src
    xv, yv = torch.randn(4), torch.randn(4)
    (out,) = fn([xv, yv])
    torch.testing.assert_close(out, torch.sin(xv * yv))


def test_codegen_refuses_unclaimed_symbols():
    x = P("x")
    trace = T([x], [S("prims.sin", [x], P("a"), "f0")], [P("a")])
    with pytest.raises(CodegenError):
        codegen(trace, [get_executor("torch")])


# ------------------------------------------------------------------------------- debug checks

def test_check_trace_accepts_every_real_pass(mlp_run):
    for name, trace in mlp_run.recorder.traces("backward").items():
        check_trace(trace)


def test_check_catches_name_used_before_definition(mlp_forward):
    t = mlp_forward["decompose"]
    swapped = t.replace(symbols=(t.symbols[1], t.symbols[0]) + t.symbols[2:])
    with pytest.raises(TraceCheckError, match="before it is defined"):
        check_trace(swapped)


def test_check_catches_read_after_del(mlp_forward):
    t = mlp_forward["liveness"]
    i = next(i for i, b in enumerate(t.symbols) if b.sym == "del")
    gone = t.symbols[i].args[0]
    reader = S("prims.neg", [gone], P("late", gone.shape, gone.dtype), "f999", aten="aten.neg.default")
    broken = t.replace(symbols=t.symbols[:i + 1] + (reader,) + t.symbols[i + 1:])
    with pytest.raises(TraceCheckError, match="after it was deleted"):
        check_trace(broken)


def test_check_catches_wrong_metadata(mlp_forward):
    t = mlp_forward["decompose"]
    i = next(i for i, b in enumerate(t.symbols) if isinstance(b.outputs, TensorProxy) and b.outputs.shape)
    b = t.symbols[i]
    wrong = b.outputs.__class__(b.outputs.name, b.outputs.shape + (1,), b.outputs.dtype, b.outputs.device)
    broken = t.replace(symbols=t.symbols[:i] + (b.replace(outputs=wrong),) + t.symbols[i + 1:])
    with pytest.raises(TraceCheckError, match="recorded as"):
        check_trace(broken)


def test_check_catches_redefinition():
    x = P("x")
    trace = T([x], [S("prims.sin", [x], P("a"), "f0"), S("prims.cos", [x], P("a"), "f1")], [P("a")])
    with pytest.raises(TraceCheckError, match="redefines"):
        check_trace(trace)
