"""``run --target`` records GPU builds; ``thundervis asm`` prints them annotated with source lines;
``ls`` shows per-target resources. One small run compiled for sm_90 is shared by the module."""
from __future__ import annotations

import json
import os

import pytest

from thundervis.recording import open_recording

from core_helpers import line_of, run_cli, write_script


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A forward + backward run of the small model with the triton executor, compiled for sm_90."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("asm")
    script = write_script(folder, "train_asm.py", """
        model(torch.randn(16, 8)).backward()
    """)
    out = check_output(os.path.join(str(folder), "asm.tvrec"))
    result = run_target(script=script, module=None, args=[], out=out, executors=["triton"], targets="sm_90")
    assert result.exit_code == 0, result
    return result.path, script


def _kernels(path):
    with open_recording(path) as rec:
        return [k.name for k in rec.kernels()]


def test_every_kernel_has_an_sm90_build(built):
    path, _ = built
    with open_recording(path) as rec:
        kernels = rec.kernels()
        builds = rec.kernel_builds()
        assert kernels and {(b.graph, b.chain, b.kernel) for b in builds} == {(k.graph, k.chain, k.name) for k in kernels}
        for b in builds:
            assert (b.target, b.status, b.spills) == ("sm_90", "ok", 0), b.error
            assert 0 < b.registers <= 255 and 0 < b.occupancy <= 1
            stages = rec.build_stages(b)
            assert set(stages.stages) == {"ttir", "ttgir", "llir", "ptx", "sass"}
        finished = [e.data for e in rec.events("aot_finished")]
        assert finished and finished[0]["failed"] == 0 and finished[0]["unfinished"] == 0


def test_ls_json_lists_targets_per_fusion(built, capsys):
    path, _ = built
    code, out, err = run_cli(capsys, "ls", "--json", path)
    assert code == 0, err
    fusions = [k for g in json.loads(out)["graphs"] for k in g["fusions"]]
    assert fusions
    for k in fusions:
        t = k["targets"]["sm_90"]
        assert {"registers", "spills", "shared_bytes", "occupancy", "roofline_us"} <= set(t)
        assert t["status"] == "ok" and t["spills"] == 0 and t["roofline_us"] > 0 and t["bound"] in ("memory", "compute")
    code, out, err = run_cli(capsys, "ls", path)
    assert code == 0 and "sm_90: " in out and " regs · 0 spills · " in out


def test_views_word_a_build_once_and_say_which_plan_a_note_describes(built, capsys):
    """asm's header and ls's target line say the same of a build (present.asm.build_text); a kernel
    row's note, made for the run's device, is headed by that device once the kernel is built for a
    target (present.status.plan_note), never read as the sm_90 plan."""
    from thundervis.present.asm import build_text
    from thundervis.present.overview import read_overview
    path, _ = built
    with open_recording(path) as rec:
        builds = {b.kernel: b for b in rec.kernel_builds()}
        rows = read_overview(rec).kernels
    assert rows and all(r.targets == ("sm_90",) for r in rows)
    assert all(r.note.startswith("cpu plan: ") for r in rows if r.note), [r.note for r in rows]
    assert any(r.note for r in rows)
    kernel = rows[0].name
    code, out, err = run_cli(capsys, "asm", path, kernel, "--stage", "ptx")
    assert code == 0, err
    text = build_text(builds[kernel])
    assert out.splitlines()[0].endswith(f" · ptx · {text}")
    code, out, err = run_cli(capsys, "ls", path)
    assert f"sm_90: {text}" in out


def test_asm_sass_is_annotated_with_user_lines(built, capsys):
    path, script = built
    tanh = line_of(script, "LINE_TANH")
    kernel = _kernels(path)[0]
    code, out, err = run_cli(capsys, "asm", path, kernel, "--target", "sm_90", "--stage", "sass")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"# {kernel} · sm_90 · sass · ")
    instructions = [x for x in lines if "/*0" in x]
    assert any("LDG" in x for x in instructions) and any("STG" in x for x in instructions)
    assert any(f"train_asm.py:{tanh}" in x for x in instructions)
    assert "//##" not in out and "\t" not in out


@pytest.mark.parametrize("stage", ["ttir", "ttgir", "llir", "ptx"])
def test_every_stage_reaches_the_user_line(built, capsys, stage):
    path, script = built
    code, out, err = run_cli(capsys, "asm", path, _kernels(path)[0], "--stage", stage)
    assert code == 0, err
    assert f"train_asm.py:{line_of(script, 'LINE_TANH')}" in out


def test_source_keeps_what_one_line_became(built, capsys):
    path, script = built
    tanh = line_of(script, "LINE_TANH")
    kernel = _kernels(path)[0]
    code, out, err = run_cli(capsys, "asm", path, kernel, "--source", f"train_asm.py:{tanh}", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows and all(r["where"] == f"train_asm.py:{tanh}" and r["uid"] for r in rows)
    # both ways: each row's uid is a symbol of that line, and that symbol's rows are all of its own
    from thundervis.present.asm import asm_listing, rows_for_uid
    with open_recording(path) as rec:
        k = rec.find_kernel(kernel)
        listing = asm_listing(rec, k, "sm_90", "sass")
        for r in rows[:5]:
            syms = rec.symbols_with_uid(k.graph, r["uid"])
            assert any(s.source is not None and s.source.line == tanh for s in syms)
            assert r["index"] in {x.index for x in rows_for_uid(listing, r["uid"])}


@pytest.mark.parametrize("argv, says", [
    (["no_such_kernel"], "no_such_kernel"),
    (["{k}", "--target", "sm_80"], "has no sm_80 build; recorded targets: sm_90"),
    (["{k}", "--source", "train_asm.py"], "--source takes FILE:LINE"),
    (["{k}", "--source", "train_asm.py:1"], "came from train_asm.py:1"),
])
def test_asm_bad_input_is_one_sentence(built, capsys, argv, says):
    path, _ = built
    argv = [a.format(k=_kernels(path)[0]) for a in argv]
    code, out, err = run_cli(capsys, "asm", path, *argv)
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1


def test_asm_without_builds_says_how_to_get_them(recorded, tmp_path, capsys):
    """A recording made without --target (the torch executor: no kernel) and one whose kernels were
    never compiled both answer with one sentence."""
    path, _ = recorded
    code, out, err = run_cli(capsys, "asm", path, "fw_fusion_0")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_run_rejects_unknown_target(tmp_path, capsys):
    script = write_script(tmp_path, "t.py", "model(torch.randn(4, 8))\n")
    code, out, err = run_cli(capsys, "run", "--no-view", "--target", "sm_42", "--out", tmp_path / "x.tvrec", script)
    assert code == 2 and "unknown GPU target 'sm_42'" in err and not (tmp_path / "x.tvrec").exists()


def test_asm_imports_neither_torch_nor_triton(built):
    """``asm`` reads through the reader only: a fresh interpreter answers without torch or Triton."""
    import subprocess
    import sys
    path, _ = built
    probe = ("import contextlib, io, json, sys\nfrom thundervis.cli import main\nout = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n    code = main(sys.argv[1:])\n"
             "print(json.dumps({'code': code, 'heavy': sorted(m for m in ('torch', 'triton') if m in sys.modules),"
             " 'n': len(out.getvalue())}))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", probe, "asm", path, _kernels(path)[0], "--stage", "ptx"],
                       capture_output=True, text=True, env=env, timeout=120)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["code"] == 0 and r["heavy"] == [] and r["n"] > 1000, (r, p.stderr[-500:])


def test_the_short_resources_text_keeps_every_number():
    """The narrow form (the asm title on a small screen) says the same numbers as the full one,
    shared memory and several launches included."""
    import re

    from thundervis.present.asm import resources_text
    for args in ((64, 2, 1536, 0.5, 8, 4), (32, 0, 0, 1.0, 16, None), (255, 12, 49152, None, None, None)):
        full, short = resources_text(*args), resources_text(*args, short=True)
        assert len(short) < len(full) and re.findall(r"[\d.?]+", short) == re.findall(r"[\d.?]+", full), (full, short)
    assert resources_text(64, 2, 1536, 0.5, 8, 4, short=True) == "64 regs · 2 spills · 1.5K smem · occ 50% · grid 8 ×4"
