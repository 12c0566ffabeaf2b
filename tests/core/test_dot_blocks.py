"""Fusion diagrams of models with repeated blocks read like Model Explorer: one box per module block
(``layers.3``), expanded on demand; rendering never writes Graphviz's warnings to the user's output."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from test_diff_fixtures import Collect  # noqa: F401  (registers the pwfuse executors)
from thundervis import dot
from thundervis.compiler.backend import jit, reset_graph_ids
from thundervis.dot_blocks import block_of, expanded_paths, module_blocks, symbol_block

from core_helpers import run_cli

N_LAYERS = 4


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return x + torch.tanh(self.fc(x)) * 0.5


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(N_LAYERS))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h).sum()


@pytest.fixture(scope="module")
def stacked():
    """The forward and backward traces (last pass) of a 4-layer stack compiled with the pointwise fuser."""
    torch.manual_seed(0)
    obs = Collect()
    reset_graph_ids()
    jit(Stack(), executors=["pwfuse"], observer=obs)(torch.randn(4, 8)).backward()
    return obs.chain("forward")[-1], obs.chain("backward")[-1]


def test_block_of_a_module_path():
    assert block_of("model.layers.3.self_attn.q_proj") == "model.layers.3"
    assert block_of("transformer.h.0.ln_1") == "transformer.h.0"
    assert block_of("model.embed_tokens") == "model.embed_tokens" and block_of("") == ""


def test_symbols_group_into_one_block_per_layer(stacked):
    fw, bw = stacked
    for trace in (fw, bw):
        blocks = module_blocks([b for b in trace.symbols if b.sym != "del"])
        paths = [b.path for b in blocks]
        assert sorted(p for p in paths if p.startswith("layers.")) == [f"layers.{i}" for i in range(N_LAYERS)]
        assert {"embed", "head"} <= set(paths)
        for blk in blocks:  # every symbol of a block has most of its ops in it
            assert all(symbol_block(b) == blk.path for b in blk.symbols)
    with pytest.raises(ValueError, match="blocks: .*layers.0"):
        expanded_paths(module_blocks(fw.symbols), ["nope"])
    assert expanded_paths(module_blocks(fw.symbols), ["layers"]) == {f"layers.{i}" for i in range(N_LAYERS)}


def test_a_repeated_model_is_drawn_one_box_per_block(stacked):
    fw, _ = stacked
    flat = dot.trace_to_dot(fw, blocks=False)
    src = dot.trace_to_dot(fw)  # auto: 4 numbered blocks
    for i in range(N_LAYERS):
        assert f"<B>layers.{i}</B>" not in flat
    # layer 0 reads the embedding's output, layers 1-3 are equal: one box for the three
    assert "<B>layers.0</B>" in src and "<B>layers.1–3 × 3</B>" in src
    assert "subgraph cluster_" not in src  # no fusion drawn inside a folded block
    assert src.count("->") < flat.count("->") / 2
    # layer 0 feeds layer 1: the residual stream is an edge between their boxes
    ids = {m.group(2): m.group(1) for m in re.finditer(r'^\t(block_\d+) \[label=<<B>([^<]+)</B>', src, re.M)}
    assert f"{ids['layers.0']} -> {ids['layers.1–3 × 3']}" in src
    # kernels and ops are counted in the box, and the source lines are grouped per file
    assert re.search(r"1 kernels? · \d+ ops?", src)
    line = [x for x in src.splitlines() if "<B>layers.0</B>" in x][0]
    assert line.count("test_dot_blocks.py:") == 1  # one file label, then its line numbers


def test_expanding_a_block_draws_its_ops_in_a_cluster(stacked):
    fw, bw = stacked
    folded = dot.trace_to_dot(bw)
    opened = dot.trace_to_dot(bw, expand=["layers.2"])
    assert "<B>layers.2</B> <FONT" in folded and "<B>layers.2</B> <FONT" not in opened
    assert "subgraph cluster_block_" in opened and "<B>layers.1</B> <FONT" in opened
    assert opened.count("->") > folded.count("->")
    # inside an expanded block each submodule is a nested cluster (here layers.2.fc: its matmul)
    assert re.search(r"subgraph cluster_block_\d+_\d+ \{", opened) and "label=<fc>" in opened
    every = dot.trace_to_dot(fw, expand=["*"])
    assert len(re.findall(r"subgraph cluster_block_\d+ \{", every)) == len(module_blocks(fw.symbols))
    with pytest.raises(ValueError, match="no block 'layers.9'"):
        dot.trace_to_dot(fw, expand=["layers.9"])
    # a small model without repeated blocks keeps its op-by-op drawing unless asked
    assert "<B>layers.0</B> <FONT" in dot.trace_to_dot(fw, blocks=True)


def test_equal_layers_fold_into_one_box_that_opens_its_first(stacked):
    fw, _ = stacked
    blocks = dot.diagram_blocks(fw)
    (fold,) = [b for b in blocks if b["fold"]]
    assert fold == {"id": fold["id"], "path": "layers.1", "expanded": False, "fold": "layers.1–3 × 3"}
    src = dot.trace_to_dot(fw)
    line = next(x for x in src.splitlines() if "<B>layers.1–3 × 3</B>" in x)
    assert re.search(r"each: 1 kernel · \d+ ops?", line) and "(opens layers.1)" in line
    # expanding the fold's path opens its first layer; the two left are too few to fold (FOLD_AT)
    opened = dot.diagram_blocks(fw, expand=["layers.1"])
    assert [(b["path"], b["fold"], b["expanded"]) for b in opened if b["path"].startswith("layers.")] == [
        ("layers.0", "", False), ("layers.1", "", True), ("layers.2", "", False), ("layers.3", "", False)]
    assert "<B>layers.2</B>" in dot.trace_to_dot(fw, expand=["layers.1"])
    svg = dot.render(src, "svg").decode()
    assert "layers.1–3 × 3" in svg


def test_block_labels_are_escaped():
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
    x = TensorProxy("x", (2,), "float32", "cpu")
    syms, prev = [], x
    for i in range(3):
        y = TensorProxy(f"y{i}", (2,), "float32", "cpu")
        src = SourceInfo("a.py", 3, "", f'm.<b>"x{{.{i}')
        syms.append(BoundSymbol("prims.neg", (prev,), {}, y, f"f{i}", source=src, executor="torch"))
        prev = y
    d = dot.trace_to_dot(Trace("forward", (x,), tuple(syms), (prev,)))
    labels = re.findall(r"label=(<.*?>)(?= \w+=|\]$)", d, flags=re.M)
    # the three equal blocks fold into one box: its label, made of recorded module paths, is escaped too
    assert labels and not any("<b>" in lab for lab in labels) and "&lt;b&gt;&quot;x{.0–2 × 3</B>" in d
    svg = dot.render(d, "svg").decode()  # tooltips are DOT strings: Graphviz escapes them in SVG
    assert "<svg" in svg and "<b>" not in svg and "&lt;b&gt;" in svg


def test_cli_blocks_expand_and_flat(recorded, tmp_path, capsys):
    path, _ = recorded  # a one-module model: drawn op by op unless --blocks
    out = tmp_path / "a.dot"
    code, _, _ = run_cli(capsys, "dot", path, "-o", out)
    assert code == 0 and "<B>fc</B> <FONT" not in out.read_text()
    code, _, _ = run_cli(capsys, "dot", path, "--blocks", "-o", out)
    assert code == 0 and "<B>fc</B> <FONT" in out.read_text()
    code, _, _ = run_cli(capsys, "dot", path, "--expand", "fc", "-o", out)
    assert code == 0 and "subgraph cluster_block_" in out.read_text()
    code, stdout, err = run_cli(capsys, "dot", path, "--expand", "nope", "-o", out)
    assert code == 2 and not stdout and err.startswith("thundervis: no block 'nope' to expand (blocks: fc")
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        run_cli(capsys, "dot", path, "--flat", "--blocks", "-o", out)
    assert e.value.code == 2


_NOISY_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
from thundervis import dot
svg = dot.render('digraph {{ a [label=<<B>x</B>>]; a -> b }}', 'svg')
sys.stdout.write('OK' if b'<svg' in svg else 'NO')
"""


def test_rendering_keeps_graphviz_warnings_out_of_the_users_stderr(tmp_path):
    """Graphviz and Fontconfig write warnings to file descriptor 2 from C (the red ``Fontconfig
    warning: ... unknown element "reset-dirs"`` in notebook cells): rendering drops them. A
    Fontconfig config with an unknown element makes the warning appear for sure."""
    conf = tmp_path / "fonts.conf"
    conf.write_text('<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">'
                    '<fontconfig><reset-dirs-bogus/><dir>/usr/share/fonts</dir></fontconfig>')
    env = dict(os.environ, FONTCONFIG_FILE=str(conf), PATH="/nonexistent")  # no `dot`: pygraphviz
    root = os.path.dirname(os.path.dirname(dot.__file__))
    code = _NOISY_CHILD.format(root=root)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout == "OK", p.stderr
    assert p.stderr == ""
    # the same DOT rendered by pygraphviz in this process does write the warning: the test can fail
    probe = ("import pygraphviz; pygraphviz.AGraph(string='digraph { a [label=<<B>x</B>>] }')"
             ".draw(format='svg', prog='dot')")
    noisy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert 'unknown element "reset-dirs-bogus"' in noisy.stderr


def test_a_failed_render_is_one_sentence(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(dot.RenderError, match="^Graphviz failed: "):
        dot.render("digraph { a -> }", "svg")


N_SHARED = 6


class GatedLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x, gate):
        return x + torch.tanh(self.fc(x)) * gate


class GatedStack(torch.nn.Module):
    """Every layer reads one gate computed once at the top, as a Llama's layers read the rotary tables."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(8, 16)
        self.embed = torch.nn.Linear(8, 16)
        self.layers = torch.nn.ModuleList(GatedLayer() for _ in range(N_SHARED))

    def forward(self, x):
        g = torch.sigmoid(self.gate(x)).exp()
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, g)
        return h.sum()


def _block_ids(src: str) -> dict:
    return {m.group(1): m.group(2) for m in re.finditer(r'^\t(block_\d+) \[label=<<B>([\w.]+)</B>', src, re.M)}


def test_a_value_read_by_many_blocks_is_a_note_not_a_fan_of_edges():
    torch.manual_seed(0)
    obs = Collect()
    reset_graph_ids()
    jit(GatedStack(), executors=["pwfuse"], observer=obs)(torch.randn(4, 8)).backward()
    src = dot.trace_to_dot(obs.chain("forward")[-1], fold=False)  # one box per layer: each reads the gate
    ids = _block_ids(src)
    edges = re.findall(r"^\t(\w+) -> (block_\d+)", src, re.M)
    fans = {s: sum(1 for a, _ in edges if a == s) for s, _ in edges}
    assert max(fans.values()) <= dot.SHARED_FAN_OUT, fans  # no box wired to every layer
    readers = [p for i, p in ids.items() if p.startswith("layers.")
               and re.search(rf'^\t{i} \[label=.*reads 1 shared value \(f32\[4, 16\]\)', src, re.M)]
    assert len(readers) >= N_SHARED - 1, readers  # the gate is named in each layer that reads it
    # the residual stream still chains layer i to layer i+1 as an edge
    by_path = {p: i for i, p in ids.items()}
    assert (by_path["layers.2"], by_path["layers.3"]) in edges


def _fake(uid: str, module: str, inputs=(), out=None):
    from thundervis.compiler.ir import BoundSymbol, SourceInfo
    return BoundSymbol("prims.mul", tuple(inputs), {}, out, uid, source=SourceInfo("m.py", 1, module=module))


def test_a_kernel_with_a_layers_op_belongs_to_that_layer_not_to_a_shared_helper():
    """A Llama's rotary kernel is mostly apply_rotary_pos_emb's ops (a function module, no layer
    number) and a few of the layer's: voting it into "apply_rotary_pos_emb" made one hub box that
    every layer fed and read."""
    from thundervis.compiler.ir import BoundSymbol
    members = tuple(_fake(f"s{i}", m) for i, m in enumerate(
        ["model.rotary_emb"] * 3 + ["model.layers.4.self_attn"] * 2 + ["apply_rotary_pos_emb"] * 8))
    kernel = BoundSymbol("fw_fusion_9", (), {}, None, "k", subsymbols=members, executor="triton", fusion=True)
    assert symbol_block(kernel) == "model.layers.4"
    helper_only = BoundSymbol("fw_fusion_1", (), {}, None, "k1", subsymbols=members[:3] + members[5:],
                              executor="triton", fusion=True)
    assert symbol_block(helper_only) == "apply_rotary_pos_emb"  # no layer op: the majority still wins


def test_a_producer_feeding_many_blocks_is_a_note_on_each():
    """Distinct values from one producer to more than SHARED_FAN_OUT blocks (a hub) draw no fan either."""
    from types import SimpleNamespace
    from thundervis.dot import _block_edges
    vals = [SimpleNamespace(name=f"v{i}", shape=(2,), dtype=torch.float32) for i in range(6)]
    folded = [SimpleNamespace(node_id=f"block_{i + 1}", symbols=(SimpleNamespace(flat_inputs=lambda v=v: [v]),))
              for i, v in enumerate(vals)]
    producer = {v.name: "block_0" for v in vals}
    edges, shared = _block_edges(folded, producer, set())
    assert [e[:2] for e in edges] == [("block_0", "block_1")]  # the first reader keeps its edge
    assert sorted(shared) == [f"block_{i + 1}" for i in range(1, 6)]
    edges, shared = _block_edges(folded[:3], producer, set())
    assert len(edges) == 3 and not shared
