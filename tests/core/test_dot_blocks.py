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
        assert f"<B>layers.{i}</B>" in src and f"<B>layers.{i}</B>" not in flat
    assert "subgraph cluster_" not in src  # no fusion drawn inside a folded block
    assert src.count("->") < flat.count("->") / 2
    # layer i feeds layer i+1: the residual stream is an edge between their boxes
    ids = {m.group(2): m.group(1) for m in re.finditer(r'^\t(block_\d+) \[label=<<B>([\w.]+)</B>', src, re.M)}
    assert f"{ids['layers.0']} -> {ids['layers.1']}" in src
    # kernels and ops are counted in the box, and the source lines are grouped per file
    assert re.search(r"1 kernels? · \d+ ops?", src)
    line = [x for x in src.splitlines() if "<B>layers.1</B>" in x][0]
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
    assert labels and not any("<b>" in lab for lab in labels) and "&lt;b&gt;&quot;x{.1</B>" in d
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
