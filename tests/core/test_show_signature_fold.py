"""``thundervis show`` folds a pass's signature and its inputs' metadata as the TUI's trace pane
does: one rule and one line (present.signature_fold), ``--signature`` or ``--unfold`` print it."""
from __future__ import annotations

from core_helpers import run_cli
from fold_fixtures import write_layer_trace_recording

from thundervis.present import signature_fold
from thundervis.present.pass_traces import PassTraces
from thundervis.present.trace_lines import pass_lines
from thundervis.recording import open_recording


def test_show_prints_the_line_the_tui_shows(tmp_path, capsys):
    path = write_layer_trace_recording(str(tmp_path / "six.tvrec"), 6)
    with open_recording(path) as rec:
        lines = pass_lines(PassTraces(rec), 0, "forward", 1)
    start, end = signature_fold.signature_block(lines)
    assert [ln.kind for ln in lines[start:end]][0] == "def" and end - start >= 2
    line = signature_fold.signature_line(lines[start:end])
    assert line.text == "  7 inputs ▸"  # x and a weight per layer
    from thundervis.tui.folding import fold_signature
    assert fold_signature(lines).lines[start] == line  # the TUI draws the same line

    code, out, err = run_cli(capsys, "show", path, "--plain")
    assert code == 0 and err == ""
    shown = out.splitlines()
    assert shown[start] == line.text and "def forward(" not in out and "# x: cpu f32[8, 64]" not in out
    code, full, _ = run_cli(capsys, "show", path, "--plain", "--signature")
    assert code == 0 and "def forward(x, w0" in full and "  7 inputs ▸" not in full
    assert full.splitlines()[:start] == shown[:start] and full.splitlines()[end:] == shown[start + 1:]
    code, every, _ = run_cli(capsys, "show", path, "--plain", "--unfold")
    assert code == 0 and "def forward(x, w0" in every and "▸" not in every


def test_without_shapes_the_def_lines_fold_alone(tmp_path, capsys):
    path = write_layer_trace_recording(str(tmp_path / "six.tvrec"), 6)
    code, out, _ = run_cli(capsys, "show", path, "--plain", "--no-shapes")
    assert code == 0 and "  signature, 1 line ▸" in out.splitlines() and "def forward(" not in out


def test_the_block_follows_the_header_only():
    from thundervis.present.line_kinds import PrintedLine
    late = [PrintedLine("# graph 0", "header"), PrintedLine("  t0 = f(x)", "stmt", "u0"),
            PrintedLine("def g(x):", "def")]
    assert signature_fold.signature_block(late) == (-1, -1)
    assert signature_fold.folded_signature(late) == late
