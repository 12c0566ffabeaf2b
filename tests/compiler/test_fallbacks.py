"""Training goes on whatever the compiler cannot do: (a) an op it cannot lower runs in torch with the
reason recorded, (b) a compiler failure for one chain runs that chain eagerly and is reported once,
(c) a compiled callable that raises on its first call is replaced by the eager graph."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import thundervis.compiler.backend as backend_mod
import thundervis.compiler.pipeline as pipeline_mod
from thundervis.compiler import ThundervisCompiler

STEPS = 3


class SortNet(nn.Module):
    """A linear layer whose outputs are sorted: ``aten.sort`` has no lowering to prims."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("weights", torch.linspace(-1.0, 1.0, 8))

    def forward(self, x):
        values, _ = torch.sort(self.fc(x), dim=-1)
        return (values * self.weights).pow(2).mean()


def _train(model_fn, compile_fn=None, steps=STEPS):
    torch.manual_seed(0)
    model = model_fn()
    run = compile_fn(model) if compile_fn else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        loss = run(torch.randn(16, 8, generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _compiled(recorder):
    def compile_fn(model):
        torch._dynamo.reset()
        return torch.compile(model, backend=ThundervisCompiler(executors=["torch"], observer=recorder))
    return compile_fn


def test_unlowerable_op_runs_in_torch_with_reason(recorder_cls):
    rec = recorder_cls()
    losses = _train(SortNet, _compiled(rec))
    torch._dynamo.reset()
    assert losses == pytest.approx(_train(SortNet), rel=1e-6)
    assert rec.failures == []
    fw = rec.traces("forward")
    (sort,) = [b for b in fw["decompose"].symbols if b.sym.startswith("aten.sort.")]
    assert sort.note.startswith("not lowered: ") and not sort.subsymbols
    (claimed,) = [b for b in fw["codegen"].symbols if b.uid == sort.uid]
    assert claimed.executor == "torch" and claimed.note == sort.note


@pytest.fixture(scope="module")
def mlp_eager_losses(example):
    ex = example("train_mlp")
    return ex.train(*ex.build(0), STEPS)


def _train_mlp(example, recorder):
    ex = example("train_mlp")
    torch._dynamo.reset()
    compiler = ThundervisCompiler(executors=["torch"], observer=recorder)
    losses = ex.train(*ex.build(0), STEPS, lambda m: torch.compile(m, backend=compiler))
    torch._dynamo.reset()
    return losses


def test_compiler_failure_runs_that_chain_eagerly_and_reports_once(example, recorder_cls, monkeypatch,
                                                                    mlp_eager_losses):
    real_cse = pipeline_mod.cse

    def broken_cse(trace):
        if trace.chain == "forward":
            raise RuntimeError("injected failure in cse")
        return real_cse(trace)
    monkeypatch.setattr(pipeline_mod, "cse", broken_cse)
    rec = recorder_cls()
    losses = _train_mlp(example, rec)
    assert losses == pytest.approx(mlp_eager_losses, rel=1e-5)
    assert len(rec.failures) == 1
    graph, chain, error = rec.failures[0]
    assert chain == "forward" and "injected failure in cse" in error and error.startswith("compiler error")
    # the passes before the failure are recorded; the other chain compiled normally
    assert list(rec.traces("forward")) == ["acquire", "remat", "decompose"]
    assert "codegen" in rec.traces("backward")


def test_compiled_callable_failing_on_first_call_falls_back_to_eager(example, recorder_cls, monkeypatch,
                                                                      mlp_eager_losses):
    real_compile = backend_mod.compile_chain
    calls = {"n": 0}

    def compile_chain(trace, options):
        final, _ = real_compile(trace, options)

        def explode(args):
            calls["n"] += 1
            args.clear()  # like the generated code: inputs are already released when it fails
            raise RuntimeError("kernel exploded")
        explode._boxed_call = True
        return final, explode
    monkeypatch.setattr(backend_mod, "compile_chain", compile_chain)
    rec = recorder_cls()
    losses = _train_mlp(example, rec)
    assert losses == pytest.approx(mlp_eager_losses, rel=1e-5)
    assert calls["n"] == 2  # forward and backward each fail once, then eager runs for good
    assert sorted(c for _, c, _ in rec.failures) == ["backward", "forward"]
    assert all("runtime error: RuntimeError: kernel exploded" in e for _, _, e in rec.failures)


def test_control_flow_subgraphs_run_eagerly_with_a_reason_a_person_can_read(recorder_cls):
    """``torch.cond`` hands its branches to a higher-order op as subgraphs, which the IR does not
    hold: the chains run eagerly, matching eager, and the reason names the op and says why."""
    rec = recorder_cls()
    torch._dynamo.reset()
    w = torch.randn(8, 8, requires_grad=True)

    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a @ w, lambda a: (a @ w) * 2, (x,))
    x = torch.randn(4, 8)
    out = torch.compile(f, backend=ThundervisCompiler(observer=rec))(x)
    out.sum().backward()
    grad, w.grad = w.grad, None
    expected = f(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, w.grad)
    chains = {chain for _, chain, _ in rec.failures}
    assert {"forward", "backward"} <= chains, rec.failures
    assert all("higher_order.cond takes a subgraph" in e and "control flow" in e for _, _, e in rec.failures), rec.failures


def test_a_complex_constant_falls_back_saying_what_it_is(recorder_cls):
    rec = recorder_cls()
    torch._dynamo.reset()
    x = torch.randn(4, 8, requires_grad=True)

    def f(x):
        return torch.view_as_real(torch.view_as_complex(x.reshape(4, 4, 2)) * (1 + 2j)).sum(-1)
    out = torch.compile(f, backend=ThundervisCompiler(observer=rec))(x)
    torch.testing.assert_close(out, f(x))
    assert rec.failures and all("the complex constant (1+2j): the trace IR has no complex scalars" in e
                                for _, _, e in rec.failures), rec.failures


def test_a_decomposed_op_left_to_torch_says_why_its_prims_could_not_run():
    """An ATen op whose prims no fusion executor can run stays whole on torch; its reason is its
    prims' (here: bfloat16 on a CPU-only machine), not that the op itself is no prim."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from thundervis.compiler.acquire import fx_to_trace
    from thundervis.compiler.executors import get_executor
    from thundervis.compiler.passes.claim import claim
    from thundervis.compiler.passes.decompose import decompose
    if torch.cuda.is_available():
        pytest.skip("bfloat16 runs in Triton on CUDA")
    gm = make_fx(lambda x: torch.ops.aten.t.default(x) * 2, tracing_mode="fake")(torch.randn(3, 4, dtype=torch.bfloat16))
    claimed = claim(decompose(fx_to_trace(gm, chain="forward", graph=0)),
                    [get_executor("triton"), get_executor("torch")])
    (t,) = [b for b in claimed.symbols if b.sym == "aten.t.default"]
    assert t.executor == "torch" and t.note == "triton: bfloat16 runs in Triton only on CUDA", t.note
