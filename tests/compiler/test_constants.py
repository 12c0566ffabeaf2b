"""Tensor constants made inside forward become trace constants (or held torch ops), never eager chains."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.constants import MAX_RECORDED_ELEMENTS, ConstantNotRecorded, tensor_constant
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.printer import print_trace
from thundervis.compiler.serialize import trace_from_json, trace_to_json



class EmptyCat(torch.nn.Module):
    """Hugging Face cache code concatenates onto ``torch.tensor([])``."""

    def forward(self, x):
        past = torch.tensor([])
        return torch.cat([past, x.reshape(-1)]).reshape(x.shape).tanh()


class FloatTable(torch.nn.Module):
    def forward(self, x):
        table = torch.tensor([0.5, -1.25, 3.0, float("inf"), -0.0, 1e-30, 7.0, 2.5])
        return (x * table.clamp(max=10.0)).sin()


class IndexTensor(torch.nn.Module):
    def forward(self, x):
        idx = torch.tensor([3, 0, 2, 2, 7])
        return x.index_select(1, idx).exp()


class BoolMask(torch.nn.Module):
    def forward(self, x):
        mask = torch.tensor([True, False, True, True, False, False, True, False])
        return torch.where(mask, x, x * 2).cos()


class BigTable(torch.nn.Module):
    """Too many elements to record: held by the compiling process, run by the torch executor."""

    def forward(self, x):
        table = torch.tensor([i * 0.01 for i in range(MAX_RECORDED_ELEMENTS + 8)]).reshape(-1, 8)
        return (x @ table.t()).tanh()


MODELS = [EmptyCat, FloatTable, IndexTensor, BoolMask, BigTable]


def _compile_and_train(recorder_cls, model_cls, executors=None):
    reset_graph_ids()
    rec = recorder_cls()
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    x_eager = x.clone().requires_grad_()
    x_comp = x.clone().requires_grad_()
    eager = model_cls()(x_eager)
    eager.sum().backward()
    compiled_model = torch.compile(model_cls(), backend=ThundervisCompiler(executors=executors, observer=rec))
    got = compiled_model(x_comp)
    got.sum().backward()
    return rec, (eager, x_eager.grad), (got, x_comp.grad)


@pytest.mark.parametrize("model_cls", MODELS, ids=lambda c: c.__name__)
def test_constant_compiles_and_matches_eager(recorder_cls, model_cls):
    rec, (eager, eager_grad), (got, got_grad) = _compile_and_train(recorder_cls, model_cls)
    assert rec.failures == []
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(got_grad, eager_grad)
    forward = rec.traces("forward")
    assert "codegen" in forward, "the forward chain must compile"
    consts = [b for b in forward["acquire"].symbols if b.note and "tensor constant" in b.note]
    assert consts, "the constant is a symbol of the trace"
    for b in consts:
        if b.sym == "prims.tensor_constant":
            assert b.executor is None  # acquire: no executor yet
    final = forward["codegen"]
    for b in final.symbols:
        if b.sym == "prims.tensor_constant":
            assert b.executor == "torch"


@pytest.mark.parametrize("model_cls", [EmptyCat, FloatTable, IndexTensor, BoolMask], ids=lambda c: c.__name__)
def test_constant_data_round_trips_through_json(recorder_cls, model_cls):
    rec, *_ = _compile_and_train(recorder_cls, model_cls, executors=["torch"])
    acquired = rec.traces("forward")["acquire"]
    (b,) = [b for b in acquired.symbols if b.sym == "prims.tensor_constant"]
    assert b.args[0] is not None and "held" not in b.kwargs
    loaded = trace_from_json(trace_to_json(acquired))
    assert print_trace(loaded) == print_trace(acquired)
    x = torch.randn(*acquired.inputs[0].shape)
    args = [x] + [torch.randn(p.shape) for p in acquired.inputs[1:]]
    torch.testing.assert_close(run_trace(loaded, list(args)), run_trace(acquired, list(args)))
    # The printed trace is runnable text: the data literal is in it.
    assert "prims.tensor_constant([" in print_trace(acquired)


def test_big_constant_is_held_and_a_reloaded_trace_says_so(recorder_cls):
    rec, *_ = _compile_and_train(recorder_cls, BigTable, executors=["torch"])
    acquired = rec.traces("forward")["acquire"]
    (b,) = [b for b in acquired.symbols if b.sym == "prims.tensor_constant"]
    assert b.args[0] is None and "held" in b.kwargs and "data not recorded" in b.note
    assert len(trace_to_json(acquired)) < 20_000  # the data is not in the recording
    with pytest.raises(ConstantNotRecorded, match="was not recorded"):
        tensor_constant(None, b.args[1], dtype=torch.float32, device="cpu", held="elsewhere#1")


def test_tensor_constant_validates_its_values():
    with pytest.raises(ValueError, match="values for shape"):
        tensor_constant([1.0, 2.0], [3], dtype=torch.float32, device="cpu")
    with pytest.raises(ValueError, match="flat list of numbers"):
        tensor_constant(["os.system"], [1], dtype=torch.float32, device="cpu")
    t = tensor_constant([1, 2, 3, 4, 5, 6], [2, 3], dtype=torch.int64, device="cpu")
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert tensor_constant([], [0, 4], dtype=torch.float32, device="cpu").shape == (0, 4)


def test_constant_survives_a_real_recording(tmp_path):
    """Written by the recording's own trace encoder and read back through the reader API, the constant
    trace is the same and runs to the same values."""
    from thundervis.recording import RecordingObserver, open_recording

    reset_graph_ids()
    path = str(tmp_path / "c.tvrec")
    x = torch.randn(4, 8)
    with RecordingObserver(path) as obs:
        obs.start_run(script="t.py", module=None, argv=["t.py"], cwd=str(tmp_path), executors=["torch"])
        compiled = torch.compile(FloatTable(), backend=ThundervisCompiler(executors=["torch"], observer=obs))
        torch.testing.assert_close(compiled(x), FloatTable()(x))
        obs.finish_run("ok", 0)
    with open_recording(path) as rec:
        chain = rec.graph(0).chain("inference")
        trace = rec.pass_trace(0, "inference", chain.find_pass("acquire").index)
    (b,) = [b for b in trace.symbols if b.sym == "prims.tensor_constant"]
    assert b.args[0][3] == float("inf") and b.args[0][4] == 0.0
    torch.testing.assert_close(run_trace(trace, [x])[0], FloatTable()(x))


def test_recorded_constants_pass_the_registry_check_and_held_ones_say_why(recorder_cls):
    from thundervis.compiler.registry import UnknownSymbol, check_executable

    rec, *_ = _compile_and_train(recorder_cls, FloatTable, executors=["torch"])
    check_executable(trace_from_json(trace_to_json(rec.traces("forward")["acquire"])))
    rec, *_ = _compile_and_train(recorder_cls, BigTable, executors=["torch"])
    with pytest.raises(UnknownSymbol, match="was not recorded"):
        check_executable(trace_from_json(trace_to_json(rec.traces("forward")["acquire"])))
