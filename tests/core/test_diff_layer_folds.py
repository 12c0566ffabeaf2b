"""A pass diff folds what the pass did to a run of equal layers (thundervis.diff.layer_folds): the
first layer's changes are shown, the rest is one row worded as the trace views word a fold."""
from __future__ import annotations

import json

import pytest

from core_helpers import run_cli
from thundervis.diff import diff_traces
from thundervis.diff.layer_folds import _units, diff_folds
from thundervis.diff.render import side_by_side_plain, unified_html, unified_plain
from thundervis.present.trace_folds import instance_folds

FOLD_ROW = "@ ▸ model.layers.1–5 × 5 more: the same changes as model.layers.0 above"


def _trace(layers: int = 6, claimed=(), name: str = "acquire", head: str = "model.layers"):
    """A forward trace of ``layers`` equal blocks ``head.N`` (a matmul, an add, a tanh); the tanh
    of each layer in ``claimed`` runs in triton (the change a claim pass makes)."""
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace

    def t(n, shape=(8, 64)):
        return TensorProxy(n, shape, "float32", "cpu", (shape[1], 1))
    x, syms, n = t("x"), [], 0
    weights = [t(f"w{i}", (64, 64)) for i in range(layers)]

    def op(sym, args, module, code, line, executor=None):
        nonlocal n
        out = t(f"t{n}")
        syms.append(BoundSymbol(sym, args, {}, out, f"f{n}", source=SourceInfo("model.py", line, code, module),
                                seq_nr=n, aten=sym, executor=executor))
        n += 1
        return out
    h = op("aten.mul.Tensor", (x, 2.0), "model.embed", "h = self.embed(x)", 20)
    for i in range(layers):
        y = op("aten.mm.default", (h, weights[i]), f"{head}.{i}.fc", "y = self.fc(h)", 11)
        y = op("aten.add.Tensor", (y, h), f"{head}.{i}", "y = y + h", 12)
        h = op("aten.tanh.default", (y,), f"{head}.{i}", "return torch.tanh(y)", 13,
               "triton" if i in claimed else None)
    out = op("aten.sum.default", (h,), "model.head", "return self.head(h).sum()", 22)
    return Trace(name="forward", inputs=(x, *weights), symbols=tuple(syms), outputs=(out,), chain="forward",
                 next_uid=n, next_name=n, pass_name=name)


def test_equal_changes_fold_behind_the_first_layers():
    d = diff_traces(_trace(), _trace(claimed=range(6), name="claim"))
    (f,) = diff_folds(d)
    assert (f.shown, f.indices) == (0, (1, 2, 3, 4, 5))
    text = unified_plain(d, 3, folds=(f,))
    assert FOLD_ROW in text.splitlines()
    assert "+ t3 = aten.tanh.default(t2)  # t3: cpu f32[8, 64]  [triton]" in text  # layer 0's change is shown
    assert "t4 =" not in text and "t17 =" not in text  # layers 1-5 are behind the fold
    full = unified_plain(d, 3)
    assert "t17 =" in full and "▸" not in full
    side = side_by_side_plain(d, 3, folds=(f,))
    assert side.count("▸ model.layers.1–5 × 5 more") == 2 and "t17 =" not in side  # both columns say it
    page = unified_html(d, 3, folds=(f,))
    assert page.count("▸ model.layers.1–5") == 1 and "t17 =" not in page


def test_a_layer_changed_differently_breaks_the_run_and_unchanged_layers_do_not_fold():
    d = diff_traces(_trace(), _trace(claimed=(0, 1, 2, 4, 5), name="claim"))
    (f,) = diff_folds(d)  # 0 shown, 1-2 fold; 3 differs; 4-5 are too few
    assert f.indices == (1, 2)
    assert diff_folds(diff_traces(_trace(), _trace(name="dce"))) == ()  # nothing changed: nothing folds


def test_a_layer_split_by_a_neighbours_ops_is_one_unit():
    # backward order, each layer's rows with the next layer's fusion among them (as a backward fuse pass leaves it)
    found, at = [], 0
    for i in (5, 4, 3, 2, 1):
        for index, n, shape in ((i, 1, "moved"), (i + 1, 3, "fusion"), (i, 5, "rest")):
            found.append(("model.layers", index, at, at + n, shape))
            at += n
    assert instance_folds(found) == ()  # layer by layer nothing repeats
    (f,) = instance_folds(_units(found), "the same changes")
    # units: 5 (its first row), 6 (the fusion before it, new, and 5's rest), then 4, 3, 2, 1 alike
    assert (f.shown, f.indices, f.start, f.end) == (4, (3, 2, 1), 18, 45)


def _record(path: str, head: str = "model.layers") -> str:
    """Write a recording of one forward chain: acquire, then a claim of every layer's tanh."""
    from thundervis.recording import RecordingObserver
    obs = RecordingObserver(path)
    try:
        obs.start_run(script="model.py", module=None, argv=["model.py"], cwd="/work", executors=["torch"])
        obs.graph_started(0, {"n_inputs": 7, "n_nodes": 20, "reason": "first call"})
        obs.pass_done(0, "forward", 0, "acquire", _trace(head=head), 0.001, True)
        obs.pass_done(0, "forward", 1, "claim", _trace(claimed=range(6), name="claim", head=head), 0.001, True)
        obs.graph_finished(0, 0.5)
        obs.finish_run("ok", 0, None)
    finally:
        obs.close()
    return path


@pytest.fixture(scope="module")
def claimed(tmp_path_factory) -> str:
    return _record(str(tmp_path_factory.mktemp("diff_folds") / "claimed.tvrec"))


def test_the_diff_command_folds_by_default(claimed, capsys, tmp_path):
    code, out, err = run_cli(capsys, "diff", claimed, "--plain")
    assert code == 0 and FOLD_ROW in out.splitlines() and "t17 =" not in out
    for opened in ("--unfold", "--full"):
        code, out, _ = run_cli(capsys, "diff", claimed, "--plain", opened)
        assert code == 0 and "▸" not in out and "t17 =" in out, opened
    code, out, _ = run_cli(capsys, "diff", claimed, "--json")
    doc = json.loads(out)
    assert [f["key"] for f in doc["folds"]] == ["model.layers.1–5"]  # the rows stay whole, the folds are data
    assert doc["folds"][0]["label"] in FOLD_ROW and len(doc["lines"]) > doc["folds"][0]["end"]
    page = tmp_path / "d.html"
    assert run_cli(capsys, "diff", claimed, "--html", page)[0] == 0
    assert "▸ model.layers.1–5" in page.read_text()


def test_layer_shows_one_layers_changes_between_two_folds(claimed, capsys):
    code, out, _ = run_cli(capsys, "diff", claimed, "--plain", "--layer", "model.layers.3")
    lines = out.splitlines()
    assert code == 0
    assert "@ ▸ model.layers.1–2 × 2 more: the same changes as model.layers.0 above" in lines
    assert "@ ▸ model.layers.4–5 × 2 more: the same changes as model.layers.0 above" in lines
    # layer 3's tanh (t12) is shown with its change, layers 1-2 and 4-5 are not
    assert "+ t12 = aten.tanh.default(t11)  # t12: cpu f32[8, 64]  [triton]" in lines
    assert "t9 =" not in out and "t15 =" not in out
    code, out, _ = run_cli(capsys, "diff", claimed, "--plain", "-s", "-l", "model.layers.1", "-l", "model.layers.5")
    assert code == 0 and out.count("▸ model.layers.2–4 × 3 more") == 2  # both columns
    assert run_cli(capsys, "diff", claimed, "--plain", "--layer", "model.layers.0")[0] == 0  # shown anyway


@pytest.mark.parametrize("argv, said", [
    (("--layer", "model.layers.9"), "model.layers.9 is not a layer of this pass; its folded layers are model.layers.1–5."),
    (("--layer", "layers.x"), "'layers.x' does not name a layer"),
    (("--layer", "model.layers.3", "--unfold"), "give --layer or --unfold, not both"),
    (("--layer", "model.layers.3", "--full"), "give --layer or --full, not both"),
])
def test_a_bad_layer_is_one_sentence_and_exit_2(claimed, capsys, argv, said):
    code, out, err = run_cli(capsys, "diff", claimed, "--plain", *argv)
    assert code == 2 and said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_hostile_block_path_is_shown_not_obeyed(tmp_path, capsys):
    path = _record(str(tmp_path / "hostile.tvrec"), head="m\x1b[2J<b>x</b>.layers")
    for argv in (("diff", path, "--plain"), ("diff", path, "--plain", "-s"), ("show", path, "--plain"),
                 ("show", path, "--plain", "--layer", "nothing.3")):
        code, out, err = run_cli(capsys, *argv)
        assert "\x1b" not in out + err, argv
        assert code == 2 if "--layer" in argv else (code == 0 and "▸ m\\x1b[2J<b>x</b>.layers.1–5" in out), argv
    page = tmp_path / "d.html"
    assert run_cli(capsys, "diff", path, "--html", page)[0] == 0
    text = page.read_text()
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;.layers.1–5" in text
