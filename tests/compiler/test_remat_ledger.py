"""Rematerialization (compiler/remat.py) and the memory ledger (compiler/ledger.py): ``auto``
recomputes a cheap pointwise chain in the backward instead of saving it, gradients still match
eager, the ``remat`` pass is recorded with its decisions, and the ledger's saved total equals what
``saved_tensors_hooks`` measures, exactly."""
from __future__ import annotations

import copy
import os
import sys

import pytest
import torch

from thundervis.compiler import CompileObserver
from thundervis.compiler.backend import ThundervisCompiler, reset_graph_ids
from thundervis.compiler.ledger import aliases, extent_bytes, peak, region_scratch, timeline
from thundervis.compiler.ir import BoundSymbol, TensorProxy, Trace

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")


class Ledgers(CompileObserver):
    """Keeps every ledger and the passes of every chain."""

    def __init__(self):
        self.ledgers, self.passes = {}, []

    def memory_ledger(self, graph, ledger):
        self.ledgers[graph] = ledger

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.passes.append((graph, chain, index, name, trace, changed))


class Block(torch.nn.Module):
    """A linear layer, a long chain of pointwise ops, another linear: what min-cut recomputes."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, x):
        h = self.a(x)
        h = torch.tanh(h) * torch.sigmoid(h) + h * 0.5
        return self.b(torch.relu(h) * h).square().mean()


def measured(run, model, x) -> int:
    """Saved bytes of one step, as benchmarks/saved_memory.py counts them."""
    sys.path.insert(0, BENCH)
    try:
        from _memory_models import saved_bytes
    finally:
        sys.path.remove(BENCH)

    class Out:
        def __init__(self, loss):
            self.loss = loss
    return saved_bytes(lambda x: Out(run(x)), model, {"x": x})[0]


def compiled(model, remat, executors=("torch",)):
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Ledgers()
    backend = ThundervisCompiler(executors=list(executors) if executors else None, observer=obs, remat=remat)
    return torch.compile(model, backend=backend, dynamic=False), obs


@pytest.mark.parametrize("executors", [("torch",), None])
def test_auto_saves_less_matches_eager_and_ledger_equals_measured(executors):
    torch.manual_seed(0)
    base, x = Block(), torch.randn(16, 32)
    ref = copy.deepcopy(base)
    ref(x).backward()
    totals = {}
    for remat in ("off", "auto"):
        model = copy.deepcopy(base)
        run, obs = compiled(model, remat, executors)
        run(x).backward()
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=f"{remat}: gradient of {n}")
        model.zero_grad()
        got = measured(run, model, x)
        ledger = obs.ledgers[0]
        assert ledger["totals"]["saved_bytes"] == got, (remat, ledger["saved"])
        assert ledger["totals"]["policy"] == remat
        totals[remat] = got
        # both policies' what-if are recorded whichever ran, the one that ran equal to the ledger
        assert ledger["totals"][f"what_if_{remat}"] == got
    assert totals["auto"] < totals["off"]
    assert ledger["totals"]["what_if_off"] == totals["off"]


class Wide(torch.nn.Module):
    """Two linears with weights far larger than the activations their backward reads."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(256, 512, bias=False), torch.nn.Linear(512, 256, bias=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).square().mean()


@pytest.mark.parametrize("remat", ["off", "auto"])
def test_parameters_are_counted_once_not_in_the_backward_timeline(remat):
    # The backward reads both weights (saved for it), but they are the step's parameters, counted
    # once in ``parameters``: its timeline starts with the saved activations and the incoming
    # gradient only, so the step peak is the parameters, the gradients and the activations, not
    # the weights twice.
    torch.manual_seed(0)
    run, obs = compiled(Wide(), remat)
    run(torch.randn(4, 256)).backward()
    ledger = obs.ledgers[0]
    totals, saved = ledger["totals"], ledger["saved"]
    assert any(r["kind"] in ("parameter", "view of parameter") for r in saved), "no weight saved"
    activations = sum(r["storage_bytes"] for r in saved if r["counted"])
    start = ledger["timelines"]["backward"][0]["live_bytes"]
    assert start < 4 * activations, (start, activations)  # the saved weight (512 KB) is not in it
    assert totals["peak_bytes"] < totals["parameters"] + totals["gradients"] + 4 * activations + 64


def test_remat_pass_is_recorded_with_its_decisions():
    torch.manual_seed(0)
    run, obs = compiled(Block(), "auto")
    run(torch.randn(16, 32)).backward()
    remat = {chain: (trace, changed) for g, chain, i, name, trace, changed in obs.passes if name == "remat"}
    assert set(remat) == {"forward", "backward"}
    assert all(changed for _, changed in remat.values())
    fw, bw = remat["forward"][0], remat["backward"][0]
    assert [s.note for s in bw.symbols if s.note and s.note.startswith("recomputed")], "no recomputed op noted"
    assert any(s.note and s.note.startswith("saved for backward") for s in fw.symbols)
    acquired = {chain: t for g, chain, i, name, t, _ in obs.passes if name == "acquire" and chain == "backward"}
    kept = {p.name for p in acquired["backward"].inputs} & {p.name for p in bw.inputs}
    assert kept, "the remat trace keeps the names the acquired trace gave the same values"
    decisions = obs.ledgers[0]["decisions"]
    assert {d["auto"] for d in decisions} >= {"recomputed"}
    assert all(d["off"] in ("saved", "not saved") for d in decisions)


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown remat policy 'sometimes'"):
        ThundervisCompiler(remat="sometimes")


def _p(name, shape, strides=None, dtype="float32"):
    return TensorProxy(name, shape, dtype, "cpu", strides)


def test_views_share_storage_and_dels_free_it():
    x = _p("x", (4, 8), (8, 1))
    a, v, b = _p("a", (4, 8), (8, 1)), _p("v", (8, 4), (1, 8)), _p("b", (4, 8), (8, 1))
    syms = (BoundSymbol("aten.mul.Tensor", (x, 2.0), {}, a, "f0", aten="aten.mul.Tensor"),
            BoundSymbol("aten.t.default", (a,), {}, v, "f1", aten="aten.t.default"),
            BoundSymbol("aten.add.Tensor", (x, 1.0), {}, b, "f2", aten="aten.add.Tensor"),
            BoundSymbol("del", (a,), {}, None, "f3"),
            BoundSymbol("del", (v,), {}, None, "f4"))
    trace = Trace("forward", (x,), syms, (b,))
    assert aliases(trace)["v"] == "a"
    assert [r["live_bytes"] for r in timeline(trace)] == [128, 128, 256, 256, 128]
    assert extent_bytes(_p("s", (2, 3), (6, 1))) == (1 + 6 + 2) * 4


def _region(device="cpu", executor="triton"):
    """A fusion of x: a = x*2 (intermediate), v = a.t() (a view of it), c = v+1 (intermediate),
    b = c*x.t() (the output); a trace that runs it and then deletes nothing."""
    x = TensorProxy("x", (4, 8), "float32", device, (8, 1))
    a, v = TensorProxy("a", (4, 8), "float32", device, (8, 1)), TensorProxy("v", (8, 4), "float32", device, (1, 8))
    c, b = TensorProxy("c", (8, 4), "float32", device, (4, 1)), TensorProxy("b", (8, 4), "float32", device, (4, 1))
    xt = TensorProxy("xt", (8, 4), "float32", device, (1, 8))
    members = (BoundSymbol("aten.mul.Tensor", (x, 2.0), {}, a, "m0", aten="aten.mul.Tensor"),
               BoundSymbol("aten.t.default", (a,), {}, v, "m1", aten="aten.t.default"),
               BoundSymbol("aten.add.Tensor", (v, 1.0), {}, c, "m2", aten="aten.add.Tensor"),
               BoundSymbol("aten.t.default", (x,), {}, xt, "m3", aten="aten.t.default"),
               BoundSymbol("aten.mul.Tensor", (c, xt), {}, b, "m4", aten="aten.mul.Tensor"))
    fusion = BoundSymbol("fw_fusion_0", (x,), {}, (b,), "k0", subsymbols=members, executor=executor, fusion=True)
    return Trace("forward", (x,), (fusion,), (b,))


def test_a_fusion_run_op_by_op_on_the_cpu_holds_its_intermediates():
    trace = _region()
    # a (its view v shares it) and c are alive together until the region's function returns;
    # x.t() is a view of the input, b the output already counted after the symbol.
    assert region_scratch(trace.symbols[0]) == 128 + 128
    row, = timeline(trace)
    assert (row["live_bytes"], row["transient_bytes"]) == (128, 384)
    assert peak(trace, [row])["bytes"] == 384
    # A compiled GPU kernel or another executor's kernel keeps its intermediates off the heap.
    for other in (_region(device="cuda:0"), _region(executor="nvfuser")):
        row, = timeline(other)
        assert region_scratch(other.symbols[0]) == 0 and row["transient_bytes"] == row["live_bytes"] == 128


def _layer_norm_region(members_kept: int = 7):
    """A fusion of x holding the first ``members_kept`` of a layer norm's seven prims (s = sum(x),
    mean = s/8, d = x-mean, sq = d*d, v = sum(sq), rstd = rsqrt(v), y = d*rstd), returning its last
    member's result; and {uid: the decomposed native_layer_norm} as claim keeps it."""
    def t(name, shape):
        return TensorProxy(name, shape, "float32", "cpu", (shape[1], 1))
    x, s, mean, d, sq, v, rstd, y = (t("x", (4, 8)), t("s", (4, 1)), t("mean", (4, 1)), t("d", (4, 8)),
                                     t("sq", (4, 8)), t("v", (4, 1)), t("rstd", (4, 1)), t("y", (4, 8)))
    prims = [("prims.sum", (x, [1]), s), ("prims.div", (s, 8.0), mean), ("prims.sub", (x, mean), d),
             ("prims.mul", (d, d), sq), ("prims.sum", (sq, [1]), v), ("prims.rsqrt", (v,), rstd),
             ("prims.mul", (d, rstd), y)]
    subs = tuple(BoundSymbol(sym, args, {}, out, f"m{i}", origin=("ln",)) for i, (sym, args, out) in enumerate(prims))
    parent = BoundSymbol("aten.native_layer_norm.default", (x, [8], None, None, 1e-5), {}, (y, mean, rstd), "ln",
                         aten="aten.native_layer_norm.default", subsymbols=subs)
    members = subs[:members_kept]
    fusion = BoundSymbol("fw_fusion_0", (x,), {}, (members[-1].outputs,), "k0", subsymbols=members,
                         executor="triton", fusion=True)
    return fusion, {"ln": parent}


def test_a_folded_decomposed_op_holds_only_its_calls_results():
    from thundervis.compiler.passes.claim import DECOMPOSED
    fusion, parents = _layer_norm_region()
    # All seven prims in the region: the CPU path calls native_layer_norm once, whose temporaries
    # (d, sq, s, v) are freed inside it; only its results mean and rstd stay in locals (y is the output).
    assert region_scratch(fusion, parents) == 16 + 16
    trace = Trace("forward", fusion.args, (fusion,), fusion.outputs, meta={DECOMPOSED: parents})
    row, = timeline(trace)
    assert row["transient_bytes"] - row["live_bytes"] == 32
    # Without the decomposed symbols the prims run one by one: s, mean, d, sq, v, rstd all held.
    assert region_scratch(fusion) == 16 + 16 + 128 + 128 + 16 + 16
    # A region holding only part of the prims cannot call the op: its prims' results all count.
    part, parents = _layer_norm_region(members_kept=6)
    assert region_scratch(part, parents) == 16 + 16 + 128 + 128 + 16
    assert region_scratch(part, parents) == region_scratch(part)


@pytest.mark.slow
def test_ledger_equals_measured_on_a_tiny_gpt2():
    pytest.importorskip("transformers")
    sys.path.insert(0, BENCH)
    try:
        from _memory_models import build, saved_bytes
    finally:
        sys.path.remove(BENCH)
    model, batch = build("gpt2", hidden=64, layers=1, batch=2, seq=32)
    run, obs = compiled(model, "auto", executors=None)
    run(**batch).loss.backward()
    model.zero_grad()
    got = saved_bytes(run, model, batch)[0]
    assert sum(v["totals"]["saved_bytes"] for v in obs.ledgers.values()) == got


def test_policy_reaches_the_compiler_through_jit_and_backend_options():
    import thundervis
    torch.manual_seed(0)
    x = torch.randn(16, 32)
    obs = Ledgers()
    torch._dynamo.reset()
    thundervis.jit(Block(), remat="off", observer=obs, executors=["torch"])(x).backward()
    assert [v["totals"]["policy"] for v in obs.ledgers.values()] == ["off"]
    obs2 = Ledgers()
    torch._dynamo.reset()
    torch.compile(Block(), backend="thundervis", options={"remat": "off", "observer": obs2,
                                                         "executors": ["torch"]})(x).backward()
    assert [v["totals"]["policy"] for v in obs2.ledgers.values()] == ["off"]
