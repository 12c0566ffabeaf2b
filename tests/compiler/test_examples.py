"""The examples train identically compiled (torch executor) and eager, and print parseable losses."""
from __future__ import annotations

import re

import pytest
import torch

from thundervis.compiler import ThundervisCompiler

REL = 1e-5


def _assert_same_losses(compiled, eager):
    assert len(compiled) == len(eager) > 0
    for step, (c, e) in enumerate(zip(compiled, eager)):
        assert c == pytest.approx(e, rel=REL), f"step {step}: compiled {c} vs eager {e}"


def test_mlp_loss_per_step_equals_eager(mlp_run):
    assert mlp_run.recorder.failures == []
    _assert_same_losses(mlp_run.losses, mlp_run.eager_losses)
    assert mlp_run.losses[-1] < mlp_run.losses[0]  # it does train


def test_gpt_loss_per_step_equals_eager(gpt_run):
    assert gpt_run.recorder.failures == []
    _assert_same_losses(gpt_run.losses, gpt_run.eager_losses)
    chains = {c for _, c, *_ in gpt_run.recorder.passes}
    assert {"dynamo", "joint", "forward", "backward"} <= chains


def test_gradients_equal_eager(example, recorder_cls):
    ex = example("train_mlp")
    eager_model, batches = ex.build(3)
    compiled_model, _ = ex.build(3)
    x, y = batches[0]
    x_eager, x_comp = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.nn.functional.cross_entropy(eager_model(x_eager), y).backward()
    torch._dynamo.reset()
    rec = recorder_cls()
    run = torch.compile(compiled_model, backend=ThundervisCompiler(executors=["torch"], observer=rec))
    torch.nn.functional.cross_entropy(run(x_comp), y).backward()
    torch._dynamo.reset()
    assert rec.failures == []
    assert any(c == "backward" for _, c, *_ in rec.passes)
    torch.testing.assert_close(x_comp.grad, x_eager.grad, rtol=1e-5, atol=1e-6)
    for (name, pe), pc in zip(eager_model.named_parameters(), compiled_model.parameters()):
        assert pc.grad is not None, name
        torch.testing.assert_close(pc.grad, pe.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("name", ["train_mlp", "train_gpt"])
def test_main_prints_one_parseable_line_per_step(example, capsys, name):
    assert example(name).main(["--eager", "--steps", "3", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    parsed = [re.fullmatch(r"step (\d+) loss (\d+\.\d{6})", line) for line in lines]
    assert all(parsed), lines
    assert [int(m.group(1)) for m in parsed] == [0, 1, 2]


def test_gpt_rejects_a_missing_text_file(example, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        example("train_gpt").main(["--eager", "--data", str(tmp_path / "nope.txt")])
    assert exc.value.code == 2
    assert "no text file" in capsys.readouterr().err


def test_gpt_attention_avoids_sdpa(gpt_run):
    dynamo = gpt_run.recorder.traces("dynamo")["acquire"]
    syms = {b.sym for b in dynamo.symbols}
    assert not any("scaled_dot_product" in s for s in syms)
    forward = gpt_run.recorder.traces("forward")["decompose"]
    prims = {s.sym for b in forward.symbols for s in (b, *b.subsymbols)}
    assert {"prims.bmm", "prims.exp"} <= prims  # attention's matmuls and softmax, as prims


def _copy_examples(folder):
    """Copy train_mlp.py and the train_gpt.py it takes its training loop from into ``folder``, as a user would."""
    import pathlib
    import shutil
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples"
    for name in ("train_mlp.py", "train_gpt.py"):
        shutil.copy(examples / name, folder / name)
    return folder / "train_mlp.py"


def test_mlp_runs_as_a_script_beside_train_gpt(tmp_path):
    import subprocess
    import sys
    (tmp_path / "ex").mkdir()
    script = _copy_examples(tmp_path / "ex")
    proc = subprocess.run([sys.executable, str(script), "--eager", "--steps", "2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line.split()[:2] for line in proc.stdout.splitlines()] == [["step", "0"], ["step", "1"]]


@pytest.mark.slow
def test_thundervis_run_of_the_mlp_example(tmp_path, capsys):
    from thundervis.cli import main
    from thundervis.recording import open_recording
    script = _copy_examples(tmp_path)
    rec = tmp_path / "mlp.tvrec"
    code = main(["run", "--executors", "torch", "--no-view", "-o", str(rec), str(script), "--steps", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "step 1 loss" in out
    with open_recording(str(rec)) as r:
        assert any(c.kind == "forward" for g in r.overview().graphs for c in g.chains)
