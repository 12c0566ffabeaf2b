"""``thundervis diff`` and ``thundervis dot`` on real recordings (two runs, different executors)."""
from __future__ import annotations

import json
import os
import re

import pytest

import test_diff_fixtures  # noqa: F401  (registers the pwfuse / pwfuse3 executors)
from thundervis.compiler.ir import kernel_name
from core_helpers import run_cli, write_script


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("diffrec")
    script = write_script(folder, "train_tiny.py", """
        model(torch.randn(4, 8)).backward()
    """)
    out = {}
    for name, executors in (("big", ["pwfuse"]), ("small", ["pwfuse3"])):
        path = check_output(os.path.join(str(folder), f"{name}.tvrec"))
        result = run_target(script=script, module=None, args=[], out=path, executors=executors)
        assert result.exit_code == 0, result
        out[name] = result.path
    return out


def test_pass_diff_shows_ops_becoming_kernels(recordings, capsys):
    code, out, err = run_cli(capsys, "diff", recordings["big"], "--from", "decompose", "--to", "fuse")
    assert code == 0, err
    assert re.search(r"--- graph 0 forward after \d+ decompose", out)
    assert re.search(r"\+\+\+ graph 0 forward after \d+ fuse", out)
    assert f"→ fused into {kernel_name(0, 'forward', 0)}" in out
    assert f"{kernel_name(0, 'forward', 0)} <- " in out


def test_pass_diff_side_by_side_html_and_json(recordings, capsys, tmp_path):
    code, out, _ = run_cli(capsys, "diff", recordings["big"], "--chain", "backward", "--to", "fuse", "--side-by-side")
    assert code == 0 and re.search(r"graph 0 backward after \d+ claim", out) and "fused into" in out
    page = tmp_path / "d.html"
    code, out, _ = run_cli(capsys, "diff", recordings["big"], "--from", "0", "--to", "codegen", "--html", page)
    assert code == 0 and page.read_text().count("<tr") > 5
    code, out, _ = run_cli(capsys, "diff", recordings["big"], "--from", "claim", "--to", "fuse", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["counts"]["fused-into"] > 0 and any(r["kernel"] for r in doc["lines"])


@pytest.mark.parametrize("argv,needle", [
    (["--from", "nope", "--to", "fuse"], "passes: 0 acquire, 1 remat, 2 decompose"),
    (["--chain", "sideways"], "chains: dynamo, joint, forward, backward"),
    (["--graph", "9"], "graphs: 0"),
])
def test_bad_graph_chain_or_pass_names_the_choices(recordings, capsys, argv, needle):
    for cmd in (["diff", recordings["big"]], ["dot", recordings["big"], "-o", "never.svg"]):
        a = [x.replace("--from", "--pass") for x in argv] if cmd[0] == "dot" else argv
        a = [x for x in a if not (cmd[0] == "dot" and x in ("--to", "fuse"))]
        code, out, err = run_cli(capsys, *cmd, *a)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (cmd, a, err)
    assert not os.path.exists("never.svg")


def test_run_comparison_lists_fusion_differences(recordings, capsys):
    code, out, _ = run_cli(capsys, "diff", recordings["big"], recordings["small"])
    assert code == 0 and re.search(r"split \w+_fusion_\d+", out) and "executors differ" in out
    code, out, _ = run_cli(capsys, "diff", recordings["big"], recordings["small"], "--json")
    doc = json.loads(out)
    assert doc["counts"]["split"] >= 1 and doc["same_script"] is True
    code, out, _ = run_cli(capsys, "diff", recordings["big"], recordings["big"])
    assert code == 0 and "no fusion differences" in out
    code, _, err = run_cli(capsys, "diff", recordings["big"], recordings["small"], "--from", "cse")
    assert code == 2 and "two recordings" in err


def test_dot_writes_svg_png_and_dot(recordings, capsys, tmp_path):
    for name, extra in (("f.svg", []), ("f.png", ["--collapse"]), ("f.dot", ["--module", "fc"])):
        code, out, err = run_cli(capsys, "dot", recordings["big"], *extra, "-o", tmp_path / name)
        assert code == 0, err
    assert "<svg" in (tmp_path / "f.svg").read_text() and kernel_name(0, "forward", 0) in (tmp_path / "f.svg").read_text()
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert "module fc" in (tmp_path / "f.dot").read_text()
    code, _, err = run_cli(capsys, "dot", recordings["big"], "--module", "nope", "-o", tmp_path / "x.svg")
    assert code == 2 and "modules: fc" in err
    code, _, err = run_cli(capsys, "dot", recordings["big"], "-o", tmp_path / "x.gif")
    assert code == 2 and ".svg, .png" in err
