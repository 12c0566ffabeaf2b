"""Fusion diagrams: clusters per fusion, collapse, module filter, heat, rendering without `dot`."""
from __future__ import annotations

import re
import shutil

import pytest

from test_diff_fixtures import compiled
from thundervis import dot
from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace


@pytest.fixture(scope="module")
def fused():
    return compiled(("pwfuse",)).chain("forward")[-1]


def _fusions(trace):
    return [b for b in trace.symbols if b.fusion]


def test_one_cluster_per_fusion_with_members_edges_and_sources(fused):
    src = dot.trace_to_dot(fused)
    fusions = _fusions(fused)
    assert src.count("subgraph cluster_") == len(fusions) > 0
    for f in fusions:
        assert f"<B>{f.sym}</B>" in src
    border, _ = dot.executor_colors("pwfuse")
    assert f'color="{border}"' in src
    assert "f32[4, 32]" in src  # edge labels carry dtype and shape
    assert "test_diff_fixtures.py:" in src  # nodes carry their source line


def test_collapse_draws_each_fusion_as_one_node(fused):
    src = dot.trace_to_dot(fused, collapse=True)
    assert "subgraph cluster_" not in src
    for f in _fusions(fused):
        assert f"<B>{f.sym}</B>" in src
    assert src.count("->") < dot.trace_to_dot(fused).count("->")


def test_module_filter_keeps_the_module_and_its_boundary_inputs(fused):
    full = dot.trace_to_dot(fused)
    ln = dot.trace_to_dot(fused, module="ln")
    assert "module ln" in ln and len(ln) < len(full)
    assert "style=\"dashed,filled\"" in ln  # the value from fc1 enters as a boundary node
    assert "<B>mm</B>" not in ln  # fc1's matmul is outside the module
    assert "ln" in dot.modules_of(fused)
    with pytest.raises(ValueError, match="modules: .*fc1"):
        dot.trace_to_dot(fused, module="nope")
    # module paths match on whole components: "f" is not a prefix of "fc1"
    with pytest.raises(ValueError):
        dot.trace_to_dot(fused, module="f")


def test_heat_colours_follow_kernel_times(fused):
    names = [f.sym for f in _fusions(fused)]
    timings = {n: 10.0 * (i + 1) for i, n in enumerate(names)}
    src = dot.trace_to_dot(fused, collapse=True, timings=timings)
    assert dot.heat_color(1.0) in src  # the slowest kernel is the hottest
    assert f"{timings[names[-1]]:.1f} µs" in src
    assert dot.heat_color(0.0) != dot.heat_color(1.0)


def test_labels_are_escaped():
    x = TensorProxy("x", (2,), "float32", "cpu")
    y = TensorProxy("y", (2,), "float32", "cpu")
    src_info = SourceInfo('a"b\\c.py', 3, "z = '<script>alert(1)</script>'", "m")
    b = BoundSymbol("prims.<script>", (x,), {}, y, "f0", source=src_info, executor="torch")
    d = dot.trace_to_dot(Trace("forward", (x,), (b,), (y,)))
    labels = re.findall(r"label=(<.*?>)(?= \w+=|\]$)", d, flags=re.M)
    assert labels and not any("<script>" in lab for lab in labels)
    assert "&lt;script&gt;" in d
    svg = dot.render(d, "svg").decode()  # tooltips are DOT strings; Graphviz escapes them in SVG
    assert "<svg" in svg and "<script>" not in svg and "&lt;script&gt;" in svg


def test_svg_and_png_render_through_pygraphviz_without_a_dot_binary(fused, monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    svg = dot.trace_to_svg(fused, collapse=True)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and fused.symbols and _fusions(fused)[0].sym in svg
    out = tmp_path / "f.png"
    assert dot.write_diagram(dot.trace_to_dot(fused), str(out)) == "png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(dot.RenderError, match="format"):
        dot.write_diagram("digraph {}", str(tmp_path / "f.jpgx"))
