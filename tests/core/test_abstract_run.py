"""Abstract runs (issue 39): a GPU script on fake tensors, its placeholders, the stop, the answer."""
from __future__ import annotations

import argparse
import os
import textwrap

import pytest

from thundervis.abstract_run import AbstractSettings
from thundervis.recording import open_recording
from thundervis.runner import check_output, run_target

GPU_SCRIPT = """
import torch, torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


model = nn.Sequential(*[Block(32) for _ in range(3)]).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = torch.compile(model)
x = torch.randn(4, 32, device=device, dtype=torch.bfloat16)
loss = step(x).float().pow(2).mean()
loss.backward()
opt.step()
print(f"loss {loss.item():.4f} on {device}")
"""


def _run(tmp_path, body: str, gpus=("h100", "a100")):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body).lstrip("\n"))
    out = check_output(os.path.join(str(tmp_path), "a.tvrec"))
    result = run_target(script=str(script), module=None, args=[], out=out,
                        abstract=AbstractSettings(device="cuda", gpus=gpus))
    return result, script


@pytest.mark.slow
def test_gpu_script_runs_abstractly_and_records_everything(tmp_path, capsys):
    from thundervis.present.abstract_fit import abstract_answer
    result, script = _run(tmp_path, GPU_SCRIPT)
    assert result.exit_code == 0, result
    assert "loss <abstract> on cuda" in capsys.readouterr().out  # the script saw a GPU and a placeholder
    with open_recording(result.path) as rec:
        assert rec.events("abstract_run")[0].data["device"] == "cuda"
        sites = rec.events("abstract_placeholders")[-1].data
        mine = [s for s in sites if s["kind"] == "item"]
        assert mine and mine[0]["line"] == GPU_SCRIPT.strip("\n").splitlines().index(
            'print(f"loss {loss.item():.4f} on {device}")') + 1
        g = rec.overview().graphs[0]
        kinds = {c.kind: [p.name for p in c.passes] for c in g.chains}
        assert "fuse" in kinds["forward"] and "fuse" in kinds["backward"]
        assert rec.kernels(), "Triton kernels are generated in an abstract run"
        answer = abstract_answer(rec)
    assert answer is not None and answer.optimizer == "AdamW"
    params = 3 * (32 * 64 + 64 + 64 * 32 + 32) * 2  # bf16
    assert answer.parameters == params and answer.optimizer_state == 2 * params
    assert [g.key for g in answer.gpus] == ["h100", "a100"]
    assert answer.fit_text(answer.gpus[0]).startswith("fits: ")
    h100 = answer.gpus[0]
    assert h100.floor_us and h100.step_us >= h100.floor_us  # never below 6·N·tokens / peak
    assert any("0–2 × 3" in label for label, _ in h100.by_block)  # the three blocks folded
    assert any(label.endswith(" × 3") for label, _ in h100.by_kernel)  # and their kernels, one row each
    assert answer.as_json()["gpus"][0]["fits"] is True
    _every_view_says_abstract(result.path)
    _hostile_events_are_data(result.path)


def _hostile_events_are_data(path):
    """Recorded abstract_* events of the wrong types give zeros and strings, never an exception."""
    import json
    import sqlite3
    import time
    from thundervis.present.abstract_fit import abstract_answer
    bad = {"abstract_placeholders": [{"line": "x", "count": -3, "kind": ["k"]}, 5],
           "abstract_optimizers": [{"state_bytes": "9", "optimizer": {"x": 1}}, None],
           "abstract_folding": {"regions_asked": "a"}, "abstract_stopped": ["not", "a", "dict"]}
    with sqlite3.connect(path) as c:
        for event, data in bad.items():
            c.execute("INSERT INTO events(graph_id, chain, event, data, at) VALUES (?,?,?,?,?)",
                      (None, None, event, json.dumps(data), time.time()))
    with open_recording(path) as rec:
        answer = abstract_answer(rec)
    assert answer.optimizer_state == 0 and answer.stopped is None
    assert answer.placeholders[0]["line"] == 0 and answer.placeholders[0]["count"] == 1
    assert "\n".join(answer.text_lines())


def _every_view_says_abstract(path):
    """ls (text and --json), the TUI's run summary and the widget's payload carry the same answer."""
    from thundervis.commands.ls import summary_dict, summary_text
    from thundervis.notebook_ext.data import RecordingData
    from thundervis.present.overview import read_overview
    from thundervis.tui import panels
    with open_recording(path) as rec:
        d = summary_dict(rec)
        text = summary_text(rec)
        tui = panels.run_summary(read_overview(rec)).plain
        widget = RecordingData(rec).payload(with_diagrams=False)["abstract_lines"]
    assert d["abstract"]["gpus"][0]["fit"].startswith("fits: ")
    for lines in (text, tui, "\n".join(widget)):
        assert "abstract run: fake tensors" in lines and "H100 SXM: fits: " in lines and "MFU" in lines


STOP_SCRIPT = """
import torch, torch.nn as nn

model = nn.Linear(16, 16).cuda()
step = torch.compile(model)
loss = step(torch.randn(2, 16, device="cuda")).sum()
if loss.item() > 0:
    print("positive")
print("never here")
"""


@pytest.mark.slow
def test_control_flow_on_a_value_stops_naming_the_line(tmp_path, capsys):
    result, script = _run(tmp_path, STOP_SCRIPT)
    assert result.exit_code == 2
    err = capsys.readouterr().err
    assert "train.py:6 needs a real value" in err and "if loss.item() > 0:" in err
    with open_recording(result.path) as rec:
        stopped = rec.events("abstract_stopped")[-1].data
        assert stopped["line"] == 6 and stopped["reason"] == "data_dependent"
        assert rec.overview().graphs, "what was compiled before the stop stays recorded"


def test_placeholder_prints_and_refuses_comparisons():
    from thundervis.compiler.abstract import AbstractValue, NeedsRealValue
    v = AbstractValue("train.py:3")
    assert f"{v:.4f}" == "<abstract>" and str(v * 2 + 1) == "<abstract>"
    with pytest.raises(NeedsRealValue, match="needs a real value"):
        bool(v < 0.1)


def test_gpu_option_needs_abstract_and_known_names():
    from thundervis.commands.abstract_options import abstract_settings
    from thundervis.errors import UserError
    ns = lambda **k: argparse.Namespace(**{"abstract": True, "device": None, "abstract_gpus": None, **k})  # noqa: E731
    assert abstract_settings(ns(abstract_gpus="h100,h200,a100,b200")).gpus == ("h100", "h200", "a100", "b200")
    with pytest.raises(UserError, match="no GPU 'x100'"):
        abstract_settings(ns(abstract_gpus="x100"))
    with pytest.raises(UserError, match="add --abstract"):
        abstract_settings(ns(abstract=False, abstract_gpus="h100"))
    with pytest.raises(UserError, match="--device is for an abstract run"):
        abstract_settings(ns(abstract=False, device="cpu"))
    assert abstract_settings(ns(device=None)).device == "cuda"


def test_block_folding_labels():
    from thundervis.present.abstract_fit import block_of, fold_label
    assert block_of("model.layers.17.mlp.down_proj") == "model.layers.#"
    assert block_of("0.fc1") == "#" and block_of("lm_head") == "lm_head"
    assert fold_label("model.layers.#", set(range(80))) == "model.layers.0–79 × 80"


def test_too_large_is_refused_with_the_estimate(monkeypatch):
    from thundervis.compiler.abstract import TooLargeForAbstract, check_size
    from thundervis.compiler.observer import CompileObserver
    monkeypatch.setenv("THUNDERVIS_ABSTRACT_MEMORY_GB", "1")
    check_size(100, CompileObserver(), 0)
    with pytest.raises(TooLargeForAbstract, match=r"needs about \d+\.\d GiB and 1\.0 GiB may be used"):
        check_size(10_000_000, CompileObserver(), 0)


@pytest.mark.slow
def test_jit_abstract_in_a_notebook_runs_on_fake_tensors_only():
    import torch
    import thundervis
    from thundervis.compiler.abstract import NeedsRealValue
    real = thundervis.jit(torch.nn.Linear(8, 8), abstract=True)
    with pytest.raises(NeedsRealValue, match="called on real tensors"):
        real(torch.randn(2, 8))
    with thundervis.abstract_mode():
        m = torch.nn.Linear(8, 8).cuda()
        y = thundervis.jit(m, abstract=True)(torch.randn(2, 8, device="cuda"))
        y.sum().backward()
        assert tuple(y.shape) == (2, 8) and f"{y.sum().item():.3f}" == "<abstract>"
        assert type(m.weight.grad).__name__ == "FakeTensor"  # nothing allocated, nothing ran


def test_branching_on_a_tensor_stops_naming_the_line(tmp_path, capsys):
    result, _ = _run(tmp_path, """
        import torch
        x = torch.randn(3, device="cuda")
        if (x > 0).any():
            print("some positive")
        """)
    assert result.exit_code == 2
    assert "train.py:3 needs a real value (the truth of a tensor)" in capsys.readouterr().err
