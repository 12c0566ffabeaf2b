"""Provenance: module paths read the same whichever way a model was called; a model whose every op
comes from torch's own modules (an nn.Sequential) keeps a user source line."""
from __future__ import annotations

import os

import pytest
import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.source import _clean_module_path


@pytest.mark.parametrize("spelling", [
    "getattr(L['self'].layers, '0').mlp",
    "L['self'].layers[0].mlp",
    "L['self']._modules['layers']._modules['0'].mlp",
    "L['model'].layers.0.mlp",
    "L['m'].layers.0.mlp",
    "L['args'][0].layers.0.mlp",
    "L['kwargs']['model'].layers.0.mlp",
    "G['model'].layers.0.mlp",
    "args[0].layers.0.mlp",
    "self.layers.0.mlp",
    "L['fn'].layers.0.mlp",
])
def test_module_path_spellings_normalize_to_one(spelling):
    assert _clean_module_path(spelling) == "layers.0.mlp"


def test_a_module_reached_through_a_python_module_global_is_the_callers():
    """transformers 5 wraps apply_rotary_pos_emb in a module held by modeling_llama's globals: its
    ops belong to the attention layer that called it, not to a top-level "apply_rotary_pos_emb"."""
    from thundervis.compiler.source import module_path
    stack = {"1": ("L['self'].model.layers[3].self_attn", object),
             "2": ("G['__import_transformers_dot_models_dot_llama_dot_modeling_llama'].apply_rotary_pos_emb",
                   object)}
    assert module_path({"nn_module_stack": stack}) == "model.layers.3.self_attn"
    assert module_path({"nn_module_stack": {"1": ("G['__import_x'].f", object)}}) == ""
    assert module_path({"nn_module_stack": {"1": ("G['model'].layers[0]", object)}}) == "layers.0"


def test_root_module_path_is_empty():
    for root in ("L['self']", "L['args'][0]", "G['model']", "self"):
        assert _clean_module_path(root) == ""


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.mlp(x))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


_GLOBAL_MODEL = Model()


def _paths(recorder_cls, how: str) -> dict:
    torch._dynamo.reset()  # the lambdas and Model.forward must compile here, whatever ran before
    reset_graph_ids()
    rec = recorder_cls()
    backend = ThundervisCompiler(executors=["torch"], observer=rec)
    model = _GLOBAL_MODEL
    x = torch.randn(2, 4)
    if how == "module":
        out = torch.compile(model, backend=backend)(x)
    elif how == "argument":
        out = torch.compile(lambda m, x: m(x), backend=backend)(model, x)
    elif how == "varargs":
        out = torch.compile(lambda *args: args[0](args[1]), backend=backend)(model, x)
    else:  # a function closing over a global model
        out = torch.compile(lambda x: _GLOBAL_MODEL(x), backend=backend)(x)
    out.sum().backward()
    assert rec.failures == []
    paths = {}
    for chain in ("forward", "backward"):
        trace = rec.traces(chain)["acquire"]
        paths[chain] = sorted({b.source.module for b in trace.symbols if b.source and b.source.module})
    return paths


def test_same_model_reads_the_same_paths_whichever_way_it_was_called(recorder_cls):
    seen = {how: _paths(recorder_cls, how) for how in ("module", "argument", "varargs", "closure")}
    first = seen["module"]
    assert "layers.0.mlp" in first["forward"] and "layers.1.mlp" in first["forward"]
    assert first["backward"], "backward ops carry the module path of the forward op they differentiate"
    for how, paths in seen.items():
        assert paths == first, f"{how}: {paths} != {first}"


def test_sequential_keeps_user_source_lines(recorder_cls):
    # Every nn.Sequential shares one forward code object: earlier tests may have used up Dynamo's
    # recompile limit for it.
    torch._dynamo.reset()
    reset_graph_ids()
    rec = recorder_cls()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=["torch"], observer=rec))
    x = torch.randn(3, 4)
    out = compiled(x)  # the call site: the only user line these ops have
    call_line = _this_line() - 1
    out.sum().backward()
    for chain in ("forward", "backward"):
        trace = rec.traces(chain)["acquire"]
        sources = [b.source for b in trace.symbols if b.source is not None]
        assert sources and all(s.line > 0 and s.file for s in sources), chain
        assert {(os.path.basename(s.file), s.line) for s in sources} == {("test_source.py", call_line)}
        assert {s.module for s in sources} - {""} <= {"0", "1", "2"}
        assert "out = compiled(x)" in sources[0].code


def _this_line() -> int:
    import inspect
    return inspect.currentframe().f_back.f_lineno


def test_a_notebook_cell_reads_cell_n_with_its_text_in_linecache():
    pytest.importorskip("IPython")
    import linecache

    from IPython.core.interactiveshell import InteractiveShell
    from thundervis.compiler.source import cell_file, parse_stack_trace
    shell = InteractiveShell.instance()
    path = shell.compile.cache("import torch\ny = torch.tanh(x)  # the cell's line 2\n", number=7)
    assert cell_file(path) == "cell [7]"
    assert linecache.getline("cell [7]", 2).strip() == "y = torch.tanh(x)  # the cell's line 2"
    info = parse_stack_trace(f'  File "{path}", line 2, in <module>\n    y = torch.tanh(x)\n')
    assert (info.file, info.line) == ("cell [7]", 2)
    assert cell_file("/work/train.py") == "/work/train.py"  # not a cell: unchanged


def test_ops_compiled_in_a_notebook_cell_point_at_cell_n(tmp_path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from thundervis.recording import open_recording
    shell = InteractiveShell.instance()
    shell.user_ns["_tv_out"] = str(tmp_path / "cell.tvrec")
    result = shell.run_cell(
        "import torch\n"
        "from thundervis.compiler import ThundervisCompiler\n"
        "from thundervis.recording.writer import RecordingObserver\n"
        "_w = RecordingObserver(_tv_out)\n"
        "_w.start_run(script='notebook', module=None, argv=[], cwd='.', executors=['torch'])\n"
        "def f(x):\n"
        "    return torch.tanh(x) * 2\n"
        "torch._dynamo.reset()\n"
        "torch.compile(f, backend=ThundervisCompiler(executors=['torch'], observer=_w))(torch.randn(3))\n"
        "torch._dynamo.reset()\n"
        "_w.finish_run('ok', 0)\n"
        "_w.close()\n", store_history=True)
    assert result.success, result.error_in_exec
    cell = f"cell [{result.execution_count}]"
    with open_recording(str(tmp_path / "cell.tvrec")) as rec:
        files = {s.source.file for g in rec.graphs() for c in g.chains for s in rec.chain_symbols(g.id, c.kind)
                 if s.source is not None}
        assert files == {cell}, files
        assert "torch.tanh(x) * 2" in (rec.source_text(cell) or "")
