"""Dynamic-shape Dynamo graphs: compiled once per concrete shape, each a graph of its own that
matches eager; past the shape limit, eager with the fallback recorded; Dynamo's own restarts are
never mistaken for a failure."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thundervis.compiler.shape_specialize as shape_specialize
from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids

from checkpoint_block import CheckpointedBlock, train_like_eager


class Graphs(CompileObserver):
    """Keeps each graph's start info, every failure and every chain that compiled."""

    def __init__(self):
        self.started, self.failures, self.compiled = {}, [], set()

    def graph_started(self, graph, info):
        self.started[graph] = info

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((graph, chain, error))

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        if name == "codegen":
            self.compiled.add((graph, chain))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, idx, scale: float):
        h = self.emb(idx).mean(1)
        h = F.gelu(self.fc1(h)) * scale
        return self.fc2(h.reshape(idx.shape[0], -1))


def _train(shapes, dynamic, scales=None, limit=None, monkeypatch=None):
    """Train a compiled and an eager copy on batches of ``shapes``; return the observer and, per
    step, whether the loss and every gradient matched eager."""
    torch._dynamo.reset()
    reset_graph_ids()
    if limit is not None:
        monkeypatch.setattr(shape_specialize, "SHAPE_LIMIT", limit)
    torch.manual_seed(0)
    model, ref = Net(), Net()
    ref.load_state_dict(model.state_dict())
    obs = Graphs()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs), dynamic=dynamic)
    matches = []
    for step, (batch, length) in enumerate(shapes):
        idx = torch.randint(0, 50, (batch, length))
        scale = scales[step] if scales else 0.5
        loss = compiled(idx, scale).square().mean()
        expected = ref(idx, scale).square().mean()
        loss.backward()
        expected.backward()
        grads = all(torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6)
                    for a, b in zip(model.parameters(), ref.parameters()))
        matches.append(bool(torch.allclose(loss, expected, rtol=1e-5, atol=1e-6) and grads))
        for p in (*model.parameters(), *ref.parameters()):
            p.grad = None
    return obs, matches


@pytest.mark.parametrize("dynamic", [True, None])
def test_each_shape_of_a_dynamic_graph_compiles_as_its_own_graph_and_matches_eager(dynamic):
    """``dynamic=True``, and the default once a size changes (Dynamo's automatic dynamic shapes):
    no chain runs eagerly, every step matches eager, a recurring shape is not compiled again."""
    shapes = [(4, 7), (8, 7), (5, 3), (8, 7), (4, 7)]
    obs, matches = _train(shapes, dynamic)
    assert matches == [True] * len(shapes)
    assert obs.failures == []
    specialized = [info["specialization"] for info in obs.started.values() if "specialization" in info]
    if dynamic:  # every shape, the first one too
        assert len(specialized) == 3 and len(obs.started) == 3
    else:  # the first shape compiles statically; a size change makes Dynamo recompile with it
        # symbolic (a later change of another size: once more, with both), each specialized
        assert "specialization" not in obs.started[0] and len(specialized) == len(obs.started) - 1 >= 2
    assert any("idx 5×3" in s and "(shape" in s for s in specialized), specialized
    for graph in obs.started:
        assert {(graph, "forward"), (graph, "backward")} <= obs.compiled, (graph, obs.compiled)


def test_a_changing_float_argument_is_a_constant_of_each_specialization():
    """A Python float argument Dynamo passes as a tensor (read by ``.item()``) is one more thing a
    specialization holds fixed: each value compiles anew and the results stay eager's."""
    obs, matches = _train([(4, 7), (8, 7), (8, 7), (8, 7)], True, scales=[0.5, 0.5, 0.25, 0.5])
    assert matches == [True] * 4
    assert obs.failures == []
    reasons = [info["specialization"] for info in obs.started.values()]
    assert len(reasons) == 3 and not any("scale" in r for r in reasons[:2]), reasons
    # Same sizes as the one before, another float: the reason names the floats to tell them apart.
    assert "idx 8×7" in reasons[2] and "scale=0.25" in reasons[2], reasons


def test_past_the_shape_limit_new_shapes_run_eagerly_and_that_is_recorded_once(monkeypatch):
    shapes = [(2, 3), (3, 3), (4, 3), (5, 3), (2, 3), (6, 3)]
    obs, matches = _train(shapes, True, limit=2, monkeypatch=monkeypatch)
    assert matches == [True] * len(shapes)
    eager = [(g, c, e) for g, c, e in obs.failures if "more than 2 shapes" in e]
    assert len(eager) == 1 and eager[0][1] is None, obs.failures
    assert "idx 4×3" in eager[0][2] and "run eagerly" in eager[0][2]
    assert len([i for i in obs.started.values() if "compiled for" in i.get("specialization", "")]) == 2


def test_a_failure_to_specialize_runs_the_graph_eagerly_and_says_why(monkeypatch):
    def broken(gm, values):
        raise RuntimeError("no constants today")
    monkeypatch.setattr(shape_specialize, "with_constants", broken)
    obs, matches = _train([(4, 7), (8, 3), (4, 7), (4, 7)], True)
    assert matches == [True] * 4
    # Told once per shape (a graph each), not at every call.
    assert len(obs.failures) == 2 and all("could not be specialized" in e and "no constants today" in e
                                          for _, _, e in obs.failures), obs.failures


def test_with_constants_removes_the_inputs_and_leaves_the_graph_alone():
    def f(x, n, s):
        return x.reshape(n, -1) * s.item()

    gm = torch.fx.symbolic_trace(f)
    static = shape_specialize.with_constants(gm, {"n": 2, "s": 3.0})
    assert [n.name for n in static.graph.nodes if n.op == "placeholder"] == ["x"]
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["x", "n", "s"]
    x = torch.arange(6.0)
    assert torch.equal(static(x), x.reshape(2, 3) * 3.0)
    assert not any(n.target == "item" for n in static.graph.nodes)


def test_dynamos_restart_of_its_analysis_passes_through_and_is_no_fallback(monkeypatch):
    """Dynamo steers its own analysis by raising through the backend (a float it will specialize:
    ``TensorifyScalarRestartAnalysis``); taking that for a failure would run the graph eagerly."""
    import thundervis.compiler.backend as backend_mod
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis

    def restart(*args, **kwargs):
        raise TensorifyScalarRestartAnalysis
    monkeypatch.setattr(backend_mod, "aot_module_simplified", restart)
    obs = Graphs()
    gm = torch.fx.symbolic_trace(lambda x: x.sin())
    with pytest.raises(TensorifyScalarRestartAnalysis):
        ThundervisCompiler(observer=obs)(gm, [torch.randn(3)])
    assert obs.failures == []


def test_floats_inside_a_checkpointed_region_become_constants_of_each_shape():
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model, ref = CheckpointedBlock(), CheckpointedBlock(checkpointed=False)
    ref.load_state_dict(model.state_dict())
    obs = Graphs()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs), dynamic=True)
    train_like_eager(compiled, model, ref, [torch.randn(4, 3, height, 8) for height in (8, 10, 8, 12)])
    assert int(model.bn.num_batches_tracked) == 4
    assert obs.failures == []
    reasons = [i["specialization"] for i in obs.started.values() if "specialization" in i]
    # The sizes name a compile; the floats (eps, momentum, p) stay out of the reason while they agree.
    assert any("x 4×3×10×8" in r for r in reasons) and not any("eps" in r for r in reasons), reasons
    for graph in obs.started:
        assert (graph, "forward") in obs.compiled and (graph, "backward") in obs.compiled


def test_with_constants_reaches_into_a_checkpointed_body():
    """A constant handed to a checkpointed region's body is removed from the call and made a
    constant of the body; the original module and body are unchanged."""
    torch._dynamo.reset()
    captured = {}

    def backend(gm, example_inputs):
        captured["gm"] = gm
        return gm.forward
    from torch.utils.checkpoint import checkpoint
    bn = torch.nn.BatchNorm1d(4)
    torch.compile(lambda x: checkpoint(bn, x, use_reentrant=False), dynamic=True, backend=backend)(torch.randn(3, 4))
    gm = captured["gm"]
    floats = [n.name for n in gm.graph.nodes if n.op == "placeholder" and shape_specialize._float_as_tensor(n)]
    assert len(floats) == 2  # momentum and eps
    static = shape_specialize.with_constants(gm, {name: 0.5 for name in floats})
    call = next(n for n in static.graph.nodes if shape_specialize._body_call(n))
    body = getattr(static, call.args[0].target)
    assert not any(n.target == "item" for n in body.graph.nodes)
    assert len(call.args) == len(next(n for n in gm.graph.nodes if shape_specialize._body_call(n)).args) - 2
    assert any(n.target == "item" for n in getattr(gm, call.args[0].target).graph.nodes)
