"""Every fallback is recorded with its source line and shown by the text views: a chain that ran
eagerly, a kernel that fell back to torch at run time, Dynamo giving up after its recompile limit,
and the ops torch runs with the reason (not lowered / not fused): ``ls`` (with ``N of M chains ran
eagerly``), the end of ``run``, ``show`` next to the symbol, ``diff`` and text ``lineage``."""
from __future__ import annotations

import json
import os

import pytest

import thundervis.compiler.backend as backend_mod
from thundervis.recording import open_recording
from thundervis.present.status import EAGER, KERNEL, NOT_TRACED, RECOMPILE_LIMIT, TORCH_OP, chain_counts, fallbacks

from core_helpers import line_of, run_cli
from fallback_fixtures import fail_first_launch

SCRIPT = """\
import torch
torch._dynamo.config.recompile_limit = 1

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        values, _ = torch.sort(self.fc(x), dim=-1)  # LINE_SORT
        return torch.round(values, decimals=2).pow(2).mean() + torch.tanh(x).sum()  # LINE_ROUND

def scaled(x, n):
    return torch.relu(x) * n  # LINE_SCALED

torch.manual_seed(0)
model = torch.compile(M())
for _ in range(2):
    model(torch.randn(4, 8)).backward()
f = torch.compile(scaled)
for n in range(3):  # an int argument Dynamo specializes on: a recompile per value
    f(torch.randn(4), n)

lstm = torch.nn.LSTM(4, 4)

def recurrent(x):
    return lstm(x)[0].sum()  # LINE_LSTM: Dynamo does not trace an LSTM; the whole function runs eagerly

torch.compile(recurrent)(torch.randn(3, 2, 4))
"""

KERNEL_ERROR = "input strides (32, 1) differ from the recorded (0, 1)"


@pytest.fixture(scope="module")
def fallback_run(tmp_path_factory):
    """One recorded run with every kind of fallback: the backward chain of the model fails to
    compile (it runs eagerly), the first Triton kernel fails on its first launch, Dynamo hits its
    recompile limit, Dynamo cannot trace a function (an LSTM), and sort/round run in torch. Returns (recording path, script path, run output)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("fallbacks")
    script = os.path.join(str(folder), "train_fb.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    real_compile = backend_mod.compile_chain

    def compile_chain(trace, options):
        if trace.chain == "backward":
            raise RuntimeError("a compiler bug in backward\nwith a second line")
        return real_compile(trace, options)

    import torch._dynamo
    mp = pytest.MonkeyPatch()
    # the script lowers Dynamo's recompile limit, a process-wide setting: put it back afterwards
    mp.setattr(torch._dynamo.config, "recompile_limit", torch._dynamo.config.recompile_limit)
    mp.setattr(backend_mod, "compile_chain", compile_chain)
    failed_once = fail_first_launch(mp, KERNEL_ERROR)
    try:
        out = check_output(os.path.join(str(folder), "fb.tvrec"))
        result = run_target(script=script, module=None, args=[], out=out, executors=["triton", "torch"])
    finally:
        mp.undo()
    assert result.exit_code == 0, result
    return result.path, script, failed_once


def test_every_kind_is_recorded_with_its_source_line(fallback_run):
    path, script, failed = fallback_run
    name = os.path.basename(script)
    with open_recording(path) as rec:
        found = fallbacks(rec)
        eager, total = chain_counts(rec)
    kinds = {f.kind for f in found}
    assert {EAGER, KERNEL, RECOMPILE_LIMIT, NOT_TRACED, TORCH_OP} <= kinds
    assert eager >= 1 and total > eager
    (bw,) = [f for f in found if f.kind == EAGER and f.chain == "backward"]
    assert bw.reason.endswith("a compiler bug in backward") and bw.source and bw.source.startswith(name)
    (kernel,) = [f for f in found if f.kind == KERNEL]
    assert failed[0] in kernel.what and KERNEL_ERROR in kernel.reason and kernel.source.startswith(name)
    (limit,) = [f for f in found if f.kind == RECOMPILE_LIMIT]
    assert limit.source == f"{name}:{line_of(script, 'def scaled')}" and "recompile_limit (1)" in limit.reason
    (untraced,) = [f for f in found if f.kind == NOT_TRACED]
    assert untraced.what == "Dynamo runs recurrent eagerly" and "LSTM" in untraced.reason
    assert untraced.source == f"{name}:{line_of(script, 'LINE_LSTM')}"  # where Dynamo stopped
    sort = [f for f in found if f.kind == TORCH_OP and f.what.startswith("aten.sort")]
    assert sort and sort[0].reason.startswith("not lowered:") and sort[0].source == f"{name}:{line_of(script, 'LINE_SORT')}"
    rounds = [f for f in found if f.kind == TORCH_OP and f.what == "prims.round"]
    assert rounds and "decimals=2" in rounds[0].reason


def test_ls_shows_the_summary_and_every_fallback(fallback_run, capsys):
    path, script, failed = fallback_run
    code, out, _ = run_cli(capsys, "ls", path, "--brief")
    assert code == 0
    with open_recording(path) as rec:
        eager, total = chain_counts(rec)
    assert f"{eager} of {total} chains ran eagerly · 1 code region Dynamo skipped ran eagerly" in out
    assert (f"  train_fb.py:{line_of(script, 'LINE_LSTM')} LSTM (all of recurrent) ran eagerly (Dynamo does not "
            "support RNN, GRU, or LSTM: torch._dynamo.config.allow_rnn=True)") in out
    assert "fallback eager: graph 0 backward · backward ran eagerly · train_fb.py:" in out
    assert "fallback kernel: " in out and KERNEL_ERROR in out and failed[0] in out
    # no longer listed as plain [triton]
    assert f"fusion {failed[0]} [triton · ran on cpu via torch after its kernel failed]" in out
    assert "fallback recompile limit: Dynamo runs scaled eagerly · train_fb.py:" in out
    assert "ops run by torch (why not lowered / not fused):" in out
    assert "not lowered: its decomposition uses aten.sort.default" in out
    doc = json.loads(run_cli(capsys, "ls", path, "--json")[1])
    assert doc["chains_eager"] == eager and {f["kind"] for f in doc["fallbacks"]} >= {EAGER, KERNEL, RECOMPILE_LIMIT}


def test_show_puts_the_reason_next_to_the_symbol(fallback_run, capsys):
    path, _, failed = fallback_run
    code, out, _ = run_cli(capsys, "show", path, "--graph", "0", "--chain", "forward")
    assert code == 0
    sort_line = next(line for line in out.splitlines() if "aten.sort.default(" in line)
    assert "# torch: not lowered: its decomposition uses aten.sort.default" in sort_line
    round_line = next(line for line in out.splitlines() if "prims.round(" in line)
    assert "# torch: triton: triton cannot honour argument decimals=2" in round_line
    kernel_line = next(line for line in out.splitlines() if f"= {failed[0]}(" in line)
    assert f"ran in torch at run time: ValueError: {KERNEL_ERROR}" in kernel_line


def test_diff_shows_why_symbols_changed_executor(fallback_run, capsys):
    path, _, _ = fallback_run
    code, out, _ = run_cli(capsys, "diff", path, "--graph", "0", "--chain", "forward", "--from", "dce",
                           "--to", "claim")
    assert code == 0
    assert "why (executor and note of the symbols this pass changed):" in out
    assert "aten.sort.default: torch: not lowered:" in out and "decimals=2" in out


def test_diff_of_two_runs_compares_fallbacks(fallback_run, recorded, capsys):
    path, _, _ = fallback_run
    code, out, _ = run_cli(capsys, "diff", recorded[0], path)
    assert code == 0 and "chains ran eagerly: A 0 of 4" in out
    assert "only in B: recompile limit: Dynamo runs scaled eagerly" in out
    assert "only in B: eager: backward ran eagerly" in out
    doc = json.loads(run_cli(capsys, "diff", recorded[0], path, "--json")[1])
    assert doc["fallbacks"]["a"]["chains_eager"] == 0 and doc["fallbacks"]["b"]["fallbacks"]


def test_lineage_text_says_why(fallback_run, capsys):
    path, script, failed = fallback_run
    code, out, _ = run_cli(capsys, "lineage", path, "--graph", "0", "--source",
                           f"{os.path.basename(script)}:{line_of(script, 'LINE_ROUND')}")
    assert code == 0
    assert "why: " in out and "round: torch: triton: triton cannot honour argument decimals=2" in out
    code, out, _ = run_cli(capsys, "lineage", path, "--graph", "0", "--source",
                           f"{os.path.basename(script)}:{line_of(script, 'LINE_SORT')}")
    assert "not lowered: its decomposition uses aten.sort.default" in out


def _eager_keys(chains_eager: int, chains_total: int) -> dict:
    """The eager-region keys every ``ls --json`` document has (``eager_head``, ``eager_regions``),
    worded by present.eager_regions as ls words them, for a document with no eager region."""
    from thundervis.present.eager_regions import eager_head
    return {"eager_head": eager_head(chains_eager, chains_total, ()), "eager_regions": []}


def test_recorded_text_is_made_visible(tmp_path, capsys):
    """A note with control characters (recordings are files people send) prints escaped."""
    from thundervis.commands.ls import fallback_lines
    doc = {"chains_eager": 0, "chains_total": 1, "fallbacks": [
        {"kind": TORCH_OP, "graph": 0, "chain": "forward", "what": "aten.x", "reason": "bad\x1b[31m red",
         "source": "a.py:1", "uid": "f0"},
        {"kind": KERNEL, "graph": 0, "chain": "forward", "what": "k\x07", "reason": "e\u202e", "source": None}],
        **_eager_keys(0, 1)}
    text = "\n".join(fallback_lines(doc))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\\x1b" in text


def test_run_prints_fallbacks_at_the_end(tmp_path, capsys, monkeypatch):
    script = tmp_path / "sorty.py"
    script.write_text("import torch\n"
                      "f = torch.compile(lambda x: torch.sort(x * 2)[0] + 1)\n"
                      "f(torch.randn(4, 4))\n")
    code, out, _ = run_cli(capsys, "run", "--executors", "torch", "-o", tmp_path / "s.tvrec", "--no-view", script)
    assert code == 0
    lines = out.splitlines()
    assert "thundervis: 0 of 1 chains ran eagerly" in lines
    assert any("not lowered: its decomposition uses aten.sort.default" in x and "sorty.py:2" in x for x in lines)
    assert lines[-1].startswith("thundervis: inspect it with")


def test_reasons_differing_only_in_sizes_are_one_group():
    """A graph recompiled per batch size repeats each reason with its own shapes: one line, the
    sizes elided where they differ and kept where they are the same."""
    from thundervis.commands.ls import fallback_lines

    def op(reason, source):
        return {"kind": TORCH_OP, "graph": 0, "chain": "forward", "what": "aten.mean", "reason": reason,
                "source": source, "uid": "f0"}
    doc = {"chains_eager": 0, "chains_total": 3, "fallbacks": [
        op("prims.mean reduces dims [1] of a [16, 7, 32] tensor: only leading or trailing dims", "a.py:3"),
        op("prims.mean reduces dims [1] of a [4, 7, 32] tensor: only leading or trailing dims", "a.py:3"),
        op("matmuls stay with torch", "a.py:4"),
        op("prims.sum reduces dims [0] of a [8] tensor: fine", "a.py:5")], **_eager_keys(0, 3)}
    lines = fallback_lines(doc)
    assert lines[0] == "0 of 3 chains ran eagerly"
    assert "    2 × mean: prims.mean reduces dims [1] of a […] tensor: only leading or trailing dims · a.py:3" in lines
    assert "    1 × mean: prims.sum reduces dims [0] of a [8] tensor: fine · a.py:5" in lines
    assert len(lines) == 5, lines
