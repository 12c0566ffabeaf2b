"""The Source view (thundervis.present.source_view, ``thundervis source``): every line of a recorded
user file with the ops it became in the final passes (forward and backward), the kernels they ended
in, the ops torch runs and why, and its share of the profiled time."""
from __future__ import annotations

import json
import os

import pytest

from thundervis.present.source_view import file_label, resolve_file, source_file
from thundervis.present.status import EAGER, KERNEL, TORCH_OP
from thundervis.recording import UnknownItem, open_recording

from core_helpers import line_of, run_cli, write_script
from test_fallback_views import KERNEL_ERROR, fallback_run  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """A profiled run of the small model with the default executors (Triton fusions, matmuls on
    torch); its script carries an escape sequence and a bidi control in a comment."""
    folder = tmp_path_factory.mktemp("source_view")
    script = write_script(folder, "train_src.py", """
        # recorded text is data: \x1b[31mred\x1b[0m \u202eevil
        for _ in range(4):
            model(torch.randn(4, 8)).backward()
    """)
    out = os.path.join(str(folder), "src.tvrec")
    from thundervis.cli import main
    assert main(["run", "--profile", "--warmup", "1", "--steps", "2", "--out", out, "--no-view", script]) == 0
    return out, script


def test_every_line_with_its_ops_kernels_and_torch_fallbacks(profiled):
    path, script = profiled
    with open_recording(path) as rec:
        view = source_file(rec, "train_src.py")
        kernels = rec.kernels()
        text = rec.source_text(script)
    assert view.file == script and view.label == "train_src.py" and view.recorded
    assert [x.text for x in view.lines] == text.splitlines()  # every line of the recorded text
    tanh = view.line(line_of(script, "LINE_TANH"))
    assert {o.chain for o in tanh.ops} == {"forward", "backward"}
    assert any(o.op == "tanh" and o.kernel for o in tanh.ops)
    # the fc matmul of that line stays with torch, with the reason recorded for it
    mm = [o for o in tanh.ops if o.op == "mm" and o.chain == "forward"]
    assert mm and all(o.kernel is None and o.executor == "torch" and "matmul" in o.fallback for o in mm)
    assert ("mm", mm[0].fallback) in tanh.fallbacks
    # every kernel's recorded source lines of this file show that kernel on that line
    for k in kernels:
        for s in k.source_lines:
            if s["file"] == script:
                assert k.name in view.line(s["line"]).kernels, (k.name, s)
    # lines without ops are plain
    assert not view.line(1).ops and view.line(1).time_us is None
    fw = [n for n in tanh.notes() if n.chain == "forward"][0]
    # where each kernel ran, when the run recorded it (the CPU fast path: "ran on cpu via torch")
    from thundervis.present.status import kernel_runs
    with open_recording(path) as rec:
        runs = kernel_runs(rec.events())
    for o in tanh.ops:
        run = runs.get((o.graph, o.chain, o.kernel)) if o.kernel else None
        assert (run is not None) == bool(o.ran_on) and (not o.ran_on or o.ran_on in fw.text() or o.chain != "forward")
    assert fw.text().startswith("forward ") and "on torch: " in fw.text() and "mm (" in fw.text()


def test_time_shares_add_up_over_the_file(profiled):
    path, script = profiled
    with open_recording(path) as rec:
        view = source_file(rec, script)
        timings = rec.timings()
    assert view.profiled and view.total_us == pytest.approx(sum(c.median_us for c in timings.chains))
    timed = [x for x in view.lines if x.time_us is not None]
    assert timed and all(0 < x.share <= 1 for x in timed)
    # every measured kernel and op of this file is spread over its lines, nothing counted twice
    measured = sum(k.median_us for k in timings.kernels)
    assert sum(x.time_us for x in timed) == pytest.approx(measured, rel=1e-6)
    assert "%" in timed[0].time_text()


def test_fallbacks_eager_chain_and_run_time_kernel_fallback(fallback_run):  # noqa: F811
    path, script, failed = fallback_run
    with open_recording(path) as rec:
        view = source_file(rec, os.path.basename(script), graph=0)
    sort = view.line(line_of(script, "LINE_SORT"))
    fw_sort = [o for o in sort.ops if o.chain == "forward" and o.op.startswith("sort")]
    assert fw_sort and fw_sort[0].fallback.startswith("not lowered:") and fw_sort[0].kind == TORCH_OP
    assert not fw_sort[0].severe
    # the backward chain failed to compile: its ops ran eagerly, with the error
    bw = [o for o in sort.ops if o.chain == "backward"]
    assert bw and all(o.fallback.startswith("ran eagerly: ") and "a compiler bug in backward with a second line" in o.fallback for o in bw)
    assert all(o.kind == EAGER and o.severe for o in bw) and sort.status == "fell back"
    # the kernel that failed on its first launch ran its region in torch at run time
    hit = [o for x in view.lines for o in x.ops if o.kernel == failed[0]]
    assert hit and all(KERNEL_ERROR in o.fallback and "ran in torch at run time" in o.fallback for o in hit)
    assert all(o.kind == KERNEL and o.severe for o in hit)


def test_file_text_not_recorded_shows_the_recorded_code_lines(profiled, monkeypatch):
    path, script = profiled
    with open_recording(path) as rec:
        monkeypatch.setattr(rec, "source_lines", lambda file, limit=0: None)
        view = source_file(rec, script)
    assert not view.recorded and view.lines and all(x.ops for x in view.lines)
    tanh = view.line(line_of(script, "LINE_TANH"))
    assert "torch.tanh(self.fc(x))" in tanh.text
    assert "file text not recorded" in view.summary()


class _Files:
    def __init__(self, files):
        self._files = files

    def source_files(self):
        return list(self._files)


def test_file_names_match_by_basename_or_path_suffix():
    rec = _Files(["/home/a/proj/train.py", "/home/a/proj/lib/model.py", "/opt/x/model.py", "cell [3]"])
    assert resolve_file(rec, "train.py") == "/home/a/proj/train.py"
    assert resolve_file(rec, "proj/lib/model.py") == "/home/a/proj/lib/model.py"
    assert resolve_file(rec, "./lib/model.py") == "/home/a/proj/lib/model.py"
    assert resolve_file(rec, "cell [3]") == "cell [3]"
    with pytest.raises(UnknownItem, match="matches 2 recorded files"):
        resolve_file(rec, "model.py")
    with pytest.raises(UnknownItem, match="recorded files: .*train.py"):
        resolve_file(rec, "rain.py")  # a suffix matches whole path components only
    with pytest.raises(UnknownItem, match="no user source files"):
        resolve_file(_Files([]), "train.py")
    assert file_label("/tmp/ipykernel_1/1422955898.py") == "1422955898.py" and file_label("cell [3]") == "cell [3]"
    # a notebook cell, recorded as "cell [N]" (compiler.source), reads cell [N]:LINE
    from thundervis.present.source_view import SourceLine
    assert SourceLine("cell [3]", 16, "y = f(x)", (), None, None).label == "cell [3]:16"


def test_cli_prints_the_annotated_file(profiled, capsys):
    path, script = profiled
    code, out, _ = run_cli(capsys, "source", path, "train_src.py")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("train_src.py · ") and "profiled:" in lines[0]
    n = line_of(script, "LINE_TANH")
    (row,) = [x for x in lines if x.lstrip().startswith(f"{n} ●")]
    assert "torch.tanh(self.fc(x))" in row and "%" in row
    after = lines[lines.index(row) + 1:lines.index(row) + 12]
    assert any("↳ forward" in x for x in after) and any("↳ backward" in x for x in after)
    # recorded text is data: control characters shown, never sent to the terminal
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31m" in out
    code, default, _ = run_cli(capsys, "source", path)  # the run's script
    assert code == 0 and default == out
    code, short, _ = run_cli(capsys, "source", path, "train_src.py", "--annotated")
    assert code == 0 and len(short.splitlines()) < len(lines) and "..." in short


def test_cli_json_is_the_rows(profiled, capsys):
    path, script = profiled
    code, out, _ = run_cli(capsys, "source", path, script, "--json")
    assert code == 0
    doc = json.loads(out)
    with open_recording(path) as rec:
        assert doc == json.loads(json.dumps(source_file(rec, script).as_json()))
    row = doc["lines"][line_of(script, "LINE_TANH") - 1]
    assert row["kernels"] and row["notes"][0]["text"] and row["share"] > 0


def test_cli_bad_input_is_one_sentence(profiled, capsys, tmp_path):
    path, _ = profiled
    code, out, err = run_cli(capsys, "source", path, "nope.py")
    assert code == 2 and not out
    assert err.startswith("thundervis: no recorded file matches 'nope.py'; recorded files: ")
    assert "train_src.py" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "source", path, "train_src.py", "--graph", "9")
    assert code == 2 and "no graph 9" in err
    code, _, err = run_cli(capsys, "source", tmp_path / "missing.tvrec", "a.py")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_note_names_many_kernels_with_their_executor_in_parentheses():
    """A line of a repeated block ends in a kernel per layer: the note counts them as kernels and
    says how they ran in parentheses, never ``6 triton · ran on cpu via torch kernels``."""
    from thundervis.present.source_view import ChainNote
    ex = "triton · ran on cpu via torch"
    names = [f"fw_fusion_{i}" for i in range(1, 7)]
    note = ChainNote(0, "forward", 14, tuple((n, ex) for n in names), (), ())
    assert note.text() == ("forward 14 ops: 14 in 6 kernels (triton · ran on cpu via torch): fw_fusion_1, "
                           "fw_fusion_2, fw_fusion_3, … fw_fusion_6")
    few = ChainNote(0, "forward", 5, (("fw_fusion_1", "triton"),), (), ())
    assert few.text() == "forward 5 ops: 5 in fw_fusion_1 (triton)"


def test_line_ops_carry_their_fallback_kind(profiled):
    """Each op says what kind of fallback it is (set where it is made): the status and the views
    read the kind, never the reason text."""
    path, script = profiled
    with open_recording(path) as rec:
        view = source_file(rec, script)
    ops = [o for x in view.lines for o in x.ops]
    assert all((o.kind == TORCH_OP) == (o.fallback is not None) for o in ops if o.kernel is None)
    assert not any(o.severe for o in ops) and all(x.status != "fell back" for x in view.lines)
    assert all(o.kind == "" for o in ops if o.kernel)


def test_a_line_compiled_the_same_in_several_graphs_is_one_note_naming_them(tmp_path, capsys):
    """A recompile per batch size makes one graph per size with the same ops: a line's note names
    the graphs (``g0–2``) once instead of repeating itself per graph; a graph that made other ops of
    the line keeps a note of its own. ``source`` prints the graphs, the JSON lists them."""
    script = write_script(tmp_path, "shapes.py", """
        import torch
        lin = torch.nn.Linear(8, 8)

        def f(x, other):
            y = torch.sigmoid(lin(x)) if other else torch.tanh(lin(x))  # LINE_F
            return y.sum()

        g = torch.compile(f)
        for n, other in ((2, False), (3, False), (5, False), (4, True)):
            g(torch.randn(n, 8), other).backward()
    """, with_model=False)
    out = tmp_path / "shapes.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 0, err
    with open_recording(str(out)) as rec:
        assert len(rec.graphs()) == 4
        row = source_file(rec, "shapes.py").line(line_of(script, "LINE_F"))
    notes = [(n.chain, n.all_graphs, n.graph_label) for n in row.notes()]
    assert ("forward", (0, 1, 2), "g0–2") in notes and ("backward", (0, 1, 2), "g0–2") in notes, notes
    assert len(row.notes()) == 4, notes  # graph 3 made other ops of the line (sigmoid): its own notes
    code, text, _ = run_cli(capsys, "source", out)
    assert code == 0 and "↳ g0–2 forward" in text and "↳ g3 forward" in text, text
    doc = json.loads(run_cli(capsys, "source", out, "--json")[1])
    note = next(n for r in doc["lines"] for n in r["notes"] if n["graph_label"] == "g0–2")
    assert note["graphs"] == [0, 1, 2] and note["graph"] == 0
