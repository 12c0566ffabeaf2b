"""present.trace_folds: a pass's repeated layers fold behind one line, found from the printed lines
(equal ops, shapes and module paths but for the layer index), never from two layers that differ."""
from __future__ import annotations

import pytest

from thundervis.compiler.printer import PrintedLine
from thundervis.present.trace_folds import FOLD, LayerFold, fold_line, fold_of, layer_folds


def _layer(i: int, shape: str = "f32[4, 16]", op: str = "prims.tanh", head: str = "model.layers") -> list:
    """The printed lines of one layer: its source comment, a fusion with one member, a del."""
    src = f"  # m.py:3  x = self.block(x)   [{head}.{i}.mlp]"
    a = src.index("[")
    fusion = f"  t{i} = fw_fusion_{i}(x{i})  # t{i}: cpu {shape}"
    sub = f"    # u{i} = {op}(x{i})  # u{i}: cpu {shape}"
    return [PrintedLine(src, "source", f"f{i}", 0, ((2, len(src), "comment"), (4, 9, "file"), (11, a - 3, "code"),
                                                    (a, len(src), "module"))),
            PrintedLine(fusion, "stmt", f"f{i}", 0, ((2, 2 + len(f"t{i}"), "name"), (fusion.index("fw"), fusion.index("("), "call"),
                                                     (fusion.index("cpu"), len(fusion), "type"))),
            PrintedLine(sub, "sub", f"s{i}", 1, ((sub.index(op), sub.index(op) + len(op), "call"),
                                                 (sub.index("cpu"), len(sub), "type"))),
            PrintedLine(f"  del x{i}" + ", y" * (i % 2), "del", f"d{i}")]


def _trace(layers) -> list:
    head = [PrintedLine("# graph 0 · forward", "header"), PrintedLine("def forward(x0):", "def")]
    body = [ln for part in layers for ln in part]
    return head + body + [PrintedLine("  return (t9,)", "return")]


def test_equal_layers_fold_behind_the_first():
    lines = _trace([_layer(i) for i in range(5)])
    (f,) = layer_folds(lines)
    assert (f.head, f.shown, f.indices, f.count) == ("model.layers", 0, (1, 2, 3, 4), 4)
    assert (f.shown_start, f.start, f.end) == (2, 6, 22)  # layer 0 shown, layers 1-4 hidden, return shown
    assert f.key == "model.layers.1–4"
    assert f.label == "model.layers.1–4 × 4 more: the same ops and shapes as model.layers.0 above"
    assert fold_of((f,), 6) is f and fold_of((f,), 21) is f and fold_of((f,), 5) is None and fold_of((f,), 22) is None
    closed, opened = fold_line(f), fold_line(f, opened=True)
    assert closed.kind == FOLD and closed.uid is None and closed.text == f"  ▸ {f.label}"
    assert opened.text.startswith("  ▾ ")
    assert f.as_json()["indices"] == [1, 2, 3, 4] and f.as_json()["start"] == 6


def test_two_layers_do_not_fold_and_three_do():
    assert layer_folds(_trace([_layer(i) for i in range(2)])) == ()
    assert [f.count for f in layer_folds(_trace([_layer(i) for i in range(3)]))] == [2]


def test_a_layer_that_differs_breaks_the_run():
    # a different shape in layer 2: 0-1 and 3-4 are runs of two, nothing folds
    assert layer_folds(_trace([_layer(i, "f32[8, 16]" if i == 2 else "f32[4, 16]") for i in range(5)])) == ()
    # a different op in the last layer: it stays shown, after the fold
    (f,) = layer_folds(_trace([_layer(i, op="prims.exp" if i == 4 else "prims.tanh") for i in range(5)]))
    assert f.indices == (1, 2, 3)


def test_backward_order_folds_and_indices_must_be_consecutive():
    (f,) = layer_folds(_trace([_layer(i) for i in (5, 4, 3, 2)]))
    assert f.shown == 5 and f.indices == (4, 3, 2) and f.key == "model.layers.2–4"
    assert layer_folds(_trace([_layer(i) for i in (0, 2, 4, 6)])) == ()  # not neighbours
    assert layer_folds(_trace([_layer(i) for i in (0, 1, 0, 1)])) == ()  # not one direction


def test_two_blocks_do_not_fold_together():
    layers = [_layer(0, head="enc.layers"), _layer(1, head="enc.layers"), _layer(2, head="dec.layers"),
              _layer(3, head="dec.layers")]
    assert layer_folds(_trace(layers)) == ()


def test_hostile_lines_fold_nothing_and_do_not_raise():
    odd = [PrintedLine("  # [layers.x]", "source", None, 0, ((3, 13, "module"),)),
           PrintedLine("  # [", "source", None, 0, ((3, 99, "module"),)),
           PrintedLine("\x1b[31m", "stmt", None, 0, ((0, 5, "call"),)), PrintedLine("", "text")]
    assert layer_folds(odd) == ()
    assert layer_folds([]) == ()


@pytest.fixture(scope="module")
def six_layers(tmp_path_factory) -> str:
    from fold_fixtures import record_layers
    return record_layers(tmp_path_factory.mktemp("trace_folds"), 6)


def test_a_recorded_six_layer_step_folds_in_every_chain(six_layers):
    from thundervis.present.pass_traces import PassTraces
    from thundervis.present.trace_folds import pass_folds
    from thundervis.present.trace_lines import pass_lines
    from thundervis.present.kernel_folds import layer_of
    from thundervis.recording import open_recording
    with open_recording(six_layers) as rec:
        traces = PassTraces(rec, size=None)
        for g in rec.graphs():
            for c in g.chains:
                last = c.passes[-1].index
                lines = pass_lines(traces, g.id, c.kind, last)
                folds = pass_folds(traces, g.id, c.kind, last)
                assert folds, (c.kind, "no fold")
                for f in folds:
                    assert isinstance(f, LayerFold) and f.count >= 2
                    # every module a hidden line names is one of the hidden layers'
                    named = {layer_of(ln.text[a:e].strip("[]")) for ln in lines[f.start:f.end]
                             for a, e, k in ln.spans if k == "module"}
                    assert named and {n[1] for n in named} <= set(f.indices), (c.kind, f.label)
                    assert {ln.kind for ln in lines[f.start:f.end]} <= {"source", "stmt", "sub", "del"}


def test_opening_a_backward_instance_keeps_the_layers_around_it_folded():
    from thundervis.present.trace_folds import open_layers, parse_layer, shown_lines
    from thundervis.present.errors import DataError
    lines = _trace([_layer(i) for i in (6, 5, 4, 3, 2, 1)])
    (f,) = layer_folds(lines)
    assert f.indices == (5, 4, 3, 2, 1)
    before, after = open_layers(lines, (f,), ["model.layers.3"])
    assert (before.indices, after.indices) == ((5, 4), (2, 1))  # trace order: 5 and 4 come first
    assert before.label == "model.layers.4–5 × 2 more: the same ops and shapes as model.layers.6 above"
    shown = shown_lines(lines, (before, after))
    assert [ln.text for ln in shown if ln.kind == "source"] == [lines[2].text, _layer(3)[0].text]
    assert len(shown) == 2 + 4 + 1 + 4 + 1 + 1  # head, layer 6, fold, layer 3, fold, return
    assert open_layers(lines, (f,), ["model.layers.6"]) == (f,)  # shown anyway
    assert parse_layer("5") == ("", 5) and parse_layer("enc.block.12") == ("enc.block", 12)
    for bad in ("model.layers.7", "layers.3", "model.layers.x", "model.layers.3 ", 3):
        with pytest.raises(DataError):
            open_layers(lines, (f,), [bad])
