"""Readable input names: parameter paths instead of ``primals_N``, ``grad_out_N`` for tangents,
``fw_tN`` for saved values; valid, unique, deterministic, stable across passes; FX names kept; the
printer wraps the ``def`` line and the inputs comment at 100 columns."""
from __future__ import annotations

import ast
import keyword

import pytest
import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.input_names import (aot_input_names, assign_input_names, placeholder_name,
                                             saved_input_names, source_path_name)
from thundervis.compiler.ir import Trace, TensorProxy
from thundervis.compiler.printer import print_trace


@pytest.mark.parametrize("source, name", [
    ("L['self']._modules['blocks']._modules['0']._modules['attn']._modules['qkv']._parameters['weight']",
     "blocks_0_attn_qkv_weight"),
    ("L['idx']", "idx"),
    ("L['fn']._modules['0']._parameters['weight']", "_0_weight"),  # Dynamo entered Module._call_impl
    ("L['self'].blocks[0].attn.weight", "blocks_0_attn_weight"),
    ("G['model']._modules['fc']._buffers['running_mean']", "fc_running_mean"),
    ("L['args'][0]", "args_0"),
    ("L['x'].odd['k-k']", "x_odd_k_k"),
])
def test_dynamo_source_paths_become_names(source, name):
    assert source_path_name(source) == name


def test_placeholder_names_are_cleaned_when_there_is_no_source():
    assert placeholder_name("l_self_modules_fc1_parameters_weight_") == "fc1_weight"
    assert placeholder_name("l_x_") == "x"
    assert placeholder_name("primals_1") is None


def test_aot_placeholders_map_to_their_arguments_by_position():
    args = ["fc_weight", "fc_bias", "x"]
    names = aot_input_names(["primals_1", "primals_3", "tangents_1", "tangents_2", "mul_2", "arg1_1"], args)
    assert names == {"primals_1": "fc_weight", "primals_3": "x", "tangents_1": "grad_out_0",
                     "tangents_2": "grad_out_1", "arg1_1": "fc_bias"}
    assert aot_input_names(["primals_9"], args) == {}  # out of range: keeps its FX name


def test_assigned_names_are_safe_unique_and_keep_unrenamed_inputs():
    fx = ["primals_1", "primals_2", "primals_3", "primals_4", "mul", "primals_5"]
    wanted = {"primals_1": "t3", "primals_2": "input", "primals_3": "mul", "primals_4": "fw_fusion_2",
              "primals_5": "x y"}
    out = assign_input_names(fx, wanted)
    assert out == {"mul": "mul", "primals_1": "t3_", "primals_2": "input_", "primals_3": "mul_2",
                   "primals_4": "fw_fusion_2_", "primals_5": "x_y"}
    assert len(set(out.values())) == len(fx)
    assert all(n.isidentifier() and not keyword.iskeyword(n) for n in out.values())
    assert assign_input_names(fx, wanted) == out  # deterministic


def test_saved_values_are_named_after_the_forward_value_only_when_all_line_up():
    f32 = lambda name, shape: TensorProxy(name, shape, "float32", "cpu")  # noqa: E731
    forward_outputs = [f32("t9", ()), f32("x", (2, 4)), f32("t3", (2, 3))]
    placeholders = [("primals_3", (2, 4), "float32"), ("mul", (2, 3), "float32")]
    assert saved_input_names(placeholders, forward_outputs) == {"primals_3": "x", "mul": "fw_t3"}
    assert saved_input_names([("mul", (9,), "float32")], forward_outputs) == {}  # shapes disagree


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.qkv(x))


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = _Attn()
        self.register_buffer("scale", torch.full((8,), 0.5))

    def forward(self, x):
        return self.attn(x) * self.scale + x


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.blocks = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, idx):
        h = self.emb(idx)
        for b in self.blocks:
            h = b(h)
        return h.sum()


@pytest.fixture(scope="module")
def traces(recorder_cls):
    torch.manual_seed(0)
    model, idx = _Model(), torch.randint(0, 16, (2, 5))
    torch._dynamo.reset()
    reset_graph_ids()
    rec = recorder_cls()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=rec))
    loss = compiled(idx)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(idx).backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)  # renaming changed nothing the program computes
    torch._dynamo.reset()
    assert not rec.failures, rec.failures
    return rec


def test_compiled_traces_name_inputs_after_what_they_are(traces):
    fw = traces.traces("forward")["acquire"]
    names = [p.name for p in fw.inputs]
    assert {"emb_weight", "blocks_0_attn_qkv_weight", "blocks_1_scale", "idx"} <= set(names)
    assert fw.fx_names["blocks_0_attn_qkv_weight"].startswith("primals_")
    assert traces.traces("dynamo")["acquire"].fx_names["idx"] == "l_idx_"
    bw = traces.traces("backward")["acquire"]
    bw_names = [p.name for p in bw.inputs]
    assert "grad_out_0" in bw_names and bw.fx_names["grad_out_0"] == "tangents_1"
    fw_outputs = {p.name for p in fw.flat_outputs()}
    saved = [n for n in bw_names if n.startswith("fw_t")]
    assert saved and all(n.removeprefix("fw_") in fw_outputs for n in saved)
    for t in (fw, bw, traces.traces("joint")["acquire"]):
        assert len({p.name for p in t.inputs}) == len(t.inputs)
        assert all(p.name.isidentifier() and not p.name.startswith("primals_") for p in t.inputs
                   if p.name in t.fx_names)


def test_input_names_are_stable_across_passes(traces):
    for chain in ("forward", "backward"):
        passes = traces.traces(chain)
        # the remat pass changes what the backward is given (the values the forward saves)
        first = passes.get("remat", passes["acquire"])
        for name, t in passes.items():
            if name == "acquire" and "remat" in passes:
                continue
            assert [p.name for p in t.inputs] == [p.name for p in first.inputs], (chain, name)
            assert t.fx_names == first.fx_names, (chain, name)


def test_def_line_and_inputs_comment_wrap_at_100_columns_and_stay_python(traces):
    for chain in ("forward", "backward"):
        text = print_trace(traces.traces(chain)["codegen"])
        head = text.split("\n")[1:]
        sig_end = next(i for i, line in enumerate(head) if line.endswith("):"))
        assert sig_end > 0, "the signature of this many inputs wraps"
        header = head[:sig_end + 1] + [line for line in head[sig_end + 1:] if line.startswith("  # ")][:3]
        assert all(len(line) <= 100 for line in header), header
        assert "(primals_" in text or "(tangents_1)" in text  # the FX names are shown
        ast.parse(text)  # still Python


def test_wrapping_keeps_an_overlong_name_on_its_own_line():
    long = "x" * 120
    t = Trace("forward", (TensorProxy(long, (1,), "float32", "cpu"), TensorProxy("b", (1,), "float32", "cpu")),
              (), (), chain="forward")
    lines = print_trace(t).split("\n")
    assert lines[1] == f"def forward({long},"
    assert lines[2].strip() == "b):"
    ast.parse(print_trace(t))


@pytest.mark.parametrize("source, name", [
    ("L['kwargs']['input_ids']", "input_ids"),  # a wrapper(*args, **kwargs) around forward
    ("L['args'][0]._modules['model']._modules['layers']._modules['0']._modules['input_layernorm']"
     "._parameters['weight']", "model_layers_0_input_layernorm_weight"),
    ("L['kwargs']['past'][0]", "past_0"),
    ("L['args'][1]", "args_1"),  # a positional tensor of such a wrapper keeps its position
])
def test_wrapper_frames_name_inputs_like_plain_forward_calls(source, name):
    assert source_path_name(source) == name


def test_placeholders_of_wrapper_frames_are_cleaned_the_same_way():
    assert placeholder_name("l_kwargs_input_ids_") == "input_ids"
    assert placeholder_name("l_args_0_modules_model_modules_norm_parameters_weight_") == "model_norm_weight"
    assert placeholder_name("l_args_0_") == "args_0"


def _hf_models():
    """A tiny Llama and GPT-2 built from configs (no download)."""
    transformers = pytest.importorskip("transformers")
    import importlib.util
    import pathlib
    import sys
    zoo = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "model_zoo.py"
    spec = importlib.util.spec_from_file_location("thundervis_bench_model_zoo", zoo)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)
    spec.loader.exec_module(mod)
    mod.import_torchvision()  # transformers imports torchvision, whose C ops cannot load beside CPU torch
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=32))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=32, bos_token_id=0, eos_token_id=0))
    return {"llama": (llama, "model_layers_0_input_layernorm_weight"),
            "gpt2": (gpt2, "transformer_h_0_ln_1_weight")}


@pytest.mark.parametrize("which", ["llama", "gpt2"])
def test_transformers_models_called_with_kwargs_name_inputs_alike(recorder_cls, which):
    model, weight = _hf_models()[which]
    ids = torch.randint(0, 64, (2, 8))
    torch._dynamo.reset()
    reset_graph_ids()
    rec = recorder_cls()
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=["torch"], observer=rec))
    compiled(input_ids=ids, labels=ids).loss.backward()
    torch._dynamo.reset()
    assert not rec.failures, rec.failures
    dyn = rec.traces("dynamo", graph=0)["acquire"]
    fw = rec.traces("forward", graph=0)["acquire"]
    for trace in (dyn, fw):
        names = [p.name for p in trace.inputs]
        assert "input_ids" in names and weight in names, names
        assert not [n for n in names if n.startswith(("kwargs_", "args_0_", "self_"))], names
