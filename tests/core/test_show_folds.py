"""``thundervis show`` folds a pass's repeated layers as the TUI does (present.trace_folds), prints
one instance in place with ``--layer``, everything with ``--unfold``, and refuses bad layers in one
sentence (exit 2)."""
from __future__ import annotations

import pytest

from core_helpers import run_cli
from fold_fixtures import write_layer_trace_recording


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> str:
    return write_layer_trace_recording(str(tmp_path_factory.mktemp("show_folds") / "six.tvrec"))


def _tui_folds(path):
    """The folds the TUI and the widget show for the default pass (present.trace_folds.pass_folds)."""
    from thundervis.present.pass_traces import PassTraces
    from thundervis.present.trace_folds import pass_folds
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        return pass_folds(PassTraces(rec, size=None), 0, "forward", 1)


def _layers_named(text: str) -> set:
    """The layer indices the source comments of ``text`` name (``[model.layers.3.fc]`` -> 3)."""
    import re
    return {int(m) for m in re.findall(r"\[model\.layers\.(\d+)", text)}


def test_show_folds_as_the_tui_does_and_unfold_prints_every_line(six, capsys):
    from thundervis.present.trace_folds import fold_line
    (fold,) = _tui_folds(six)
    code, out, err = run_cli(capsys, "show", six, "--plain", "--signature")
    assert code == 0 and err == ""
    assert fold_line(fold).text in out.splitlines()  # the same line, word for word
    assert out.count("▸ ") == 1
    assert _layers_named(out) == {0}  # layers 1-5 are behind the fold
    code, full, _ = run_cli(capsys, "show", six, "--plain", "--unfold")
    assert code == 0 and "▸" not in full and _layers_named(full) == {0, 1, 2, 3, 4, 5}
    shown = out.splitlines()
    # the folded output is the full one with the hidden lines replaced by the fold line
    at = shown.index(fold_line(fold).text)
    lines = full.splitlines()
    assert shown[:at] == lines[:fold.start] and shown[at + 1:] == lines[fold.end:]
    assert len(lines) - len(shown) == fold.end - fold.start - 1


def test_layer_prints_one_instance_between_two_folds(six, capsys):
    code, out, _ = run_cli(capsys, "show", six, "--plain", "--layer", "model.layers.3")
    assert code == 0
    folds = [ln for ln in out.splitlines() if "▸ " in ln]
    assert folds == ["  ▸ model.layers.1–2 × 2 more: the same ops and shapes as model.layers.0 above",
                     "  ▸ model.layers.4–5 × 2 more: the same ops and shapes as model.layers.0 above"]
    assert _layers_named(out) == {0, 3}
    # two layers, repeated option: the last one of the fold leaves a fold of one
    code, out, _ = run_cli(capsys, "show", six, "--plain", "-l", "model.layers.3", "-l", "model.layers.5")
    assert code == 0 and _layers_named(out) == {0, 3, 5}
    assert "  ▸ model.layers.4 × 1 more: the same ops and shapes as model.layers.0 above" in out.splitlines()
    # a layer shown anyway (the fold's first instance) prints the default view
    assert run_cli(capsys, "show", six, "--plain", "-l", "model.layers.0")[1] == run_cli(capsys, "show", six, "--plain")[1]


def test_no_shapes_folds_only_layers_equal_in_their_shapes(tmp_path, capsys):
    odd = write_layer_trace_recording(str(tmp_path / "odd.tvrec"), odd=3)
    for extra in ((), ("--no-shapes",)):  # layer 3's shape differs: 1-2 fold, 4-5 are too few
        code, out, _ = run_cli(capsys, "show", odd, "--plain", *extra)
        assert code == 0 and [ln for ln in out.splitlines() if "▸ " in ln] == [
            "  ▸ model.layers.1–2 × 2 more: the same ops and shapes as model.layers.0 above"], extra
    code, out, _ = run_cli(capsys, "show", odd, "--plain", "--no-shapes", "-l", "model.layers.2")
    assert code == 0 and _layers_named(out) == {0, 2, 3, 4, 5}


@pytest.mark.parametrize("argv, said", [
    (("--layer", "model.layers.9"), "model.layers.9 is not a layer of this pass; its folded layers are model.layers.1–5."),
    (("--layer", "model.head.7"), "model.head.7 is not a layer of this pass"),
    (("--layer", "model.layers"), "'model.layers' does not name a layer"),
    (("--layer", "model..3"), "'model..3' does not name a layer"),
    (("--layer", "model.layers.3.fc"), "does not name a layer"),
    (("--layer", "\x1b[31m3"), "does not name a layer"),
    (("--layer", "model.layers.3", "--unfold"), "give --layer or --unfold, not both"),
    (("--layer", "model.layers.3", "--no-source"), "drop --no-source"),
])
def test_bad_layers_are_one_sentence_and_exit_2(six, capsys, argv, said):
    code, out, err = run_cli(capsys, "show", six, "--plain", *argv)
    assert code == 2 and out == "", (code, out)
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "\x1b" not in err  # recorded or typed, control characters are never written raw
