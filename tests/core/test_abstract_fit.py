"""The abstract run's answer (present/abstract_fit.py): a run that compiled nothing says so in every
view, and the modelled step (achievable rates) sits between the datasheet roofline and the floor's
multiples, with the three numbers in ``ls --json``."""
from __future__ import annotations

import json
import textwrap

from thundervis.recording import open_recording

from core_helpers import run_cli

STOPS_FIRST = """
import torch
data = torch.randint(0, 50, (200,))
starts = torch.randint(0, 100, (4,))
x = torch.stack([data[s:s + 16] for s in starts.tolist()]).float().cuda()  # stops: a placeholder index
model = torch.compile(torch.nn.Linear(16, 16).cuda())
model(x).sum().backward()
"""


def _script(tmp_path, body: str) -> str:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body).lstrip("\n"))
    return str(script)


def test_a_run_that_stops_before_compiling_has_nothing_to_model(tmp_path, capsys):
    from thundervis.commands.ls import summary_dict, summary_text
    from thundervis.notebook_ext.data import RecordingData
    from thundervis.present.abstract_fit import NOTHING_COMPILED, abstract_answer
    from thundervis.present.overview import read_overview
    from thundervis.tui import panels
    path = str(tmp_path / "a.tvrec")
    code, out, err = run_cli(capsys, "run", "--no-view", "--abstract", "--gpu", "h100", "-o", path,
                             _script(tmp_path, STOPS_FIRST))
    assert code == 2 and "train.py:4 needs a real value" in err
    assert f"thundervis: {NOTHING_COMPILED}" in out and "modelled step" not in out  # the run's end summary
    with open_recording(path) as rec:
        assert not rec.overview().graphs and rec.events("abstract_stopped")
        answer = abstract_answer(rec)
        d, text = summary_dict(rec), summary_text(rec)
        tui = panels.run_summary(read_overview(rec)).plain
        widget = RecordingData(rec).payload(with_diagrams=False)["abstract_lines"]
    assert not answer.compiled and answer.gpus == ()
    lines = answer.text_lines()
    assert lines[-1] == NOTHING_COMPILED and not any("modelled step" in ln or "fits" in ln for ln in lines)
    j = d["abstract"]
    assert j["compiled"] is False and j["nothing_to_model"] == NOTHING_COMPILED and j["gpus"] == []
    assert j["total_bytes"] is None and j["parameters_bytes"] is None and j["tokens"] is None
    assert NOTHING_COMPILED in text and NOTHING_COMPILED in tui and "0 µs" not in text
    assert NOTHING_COMPILED in widget
    code, out, _ = run_cli(capsys, "ls", "--json", path)
    assert code == 0 and json.loads(out)["abstract"]["compiled"] is False


TRAINS = """
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = torch.compile(model)
x = torch.randn(2, 128, 64, device="cuda", dtype=torch.bfloat16)
step(x).float().pow(2).mean().backward()
opt.step()
"""


def test_the_step_is_modelled_at_achievable_rates_beside_the_roofline_and_floor(tmp_path, capsys):
    from thundervis.gpu_rates import rates_for
    from thundervis.present.abstract_fit import abstract_answer
    from thundervis.present.memory import memory_report
    from thundervis.present.roofline import chain_costs
    path = str(tmp_path / "a.tvrec")
    code, out, _ = run_cli(capsys, "run", "--no-view", "--abstract", "--gpu", "h100,a100", "-o", path,
                           _script(tmp_path, TRAINS))
    assert code == 0 and "at datasheet peak" in out and "nothing to model" not in out
    with open_recording(path) as rec:
        answer = abstract_answer(rec)
        costs = [c for cs in chain_costs(rec).values() for c in cs]
        mem = memory_report(rec)
    # Each byte once: the step peak holds the parameters and (in the backward) the gradients made so
    # far; the answer adds the optimizer state to it, and its activations are the rest.
    assert " backward " in f" {mem.peak_where} " and answer.parameters == mem.parameters > 0
    assert answer.total == mem.peak_bytes + answer.optimizer_state
    assert answer.activations == mem.peak_bytes - mem.parameters - mem.gradients
    launches = sum(1 for c in costs if c.kind != "view")
    for g in answer.gpus:
        r = rates_for(g.key)
        # Each kernel is slower at achievable rates than at datasheet peak, by at least its launch.
        assert g.modelled_us >= g.roofline_us + launches * r.launch_us
        assert g.step_us == max(g.modelled_us, g.floor_us) and g.ratio == g.step_us / g.floor_us >= 1
        assert g.mfu == g.floor_us / g.step_us <= 1
        assert abs(sum(us for _, us in g.by_block) - g.modelled_us) < 1e-6 * g.modelled_us  # breakdowns: modelled
    j = answer.as_json()["gpus"][0]
    assert {"step_us", "floor_us", "roofline_us", "ratio", "mfu"} <= set(j) and j["roofline_us"] < j["step_us"]
    assert j["rates"]["gemm_bf16_tflops"] == 794.5 and "MAMF" in j["rates"]["sources"]["gemm_bf16"]
    code, out, _ = run_cli(capsys, "ls", "--json", path)
    assert json.loads(out)["abstract"]["gpus"][0]["step_us"] == j["step_us"]


def _answer(parameters, activations, remat_saves=0):
    """An answer with AdamW's state (two per parameter) and gradients as big as the parameters."""
    from thundervis.present.abstract_fit import AbstractAnswer, GpuAnswer
    total = 4 * parameters + activations
    gpu = GpuAnswer("h100", "H100 SXM", 80e9, total, 1.0, 1.0, 1.0, 1.0, (), (), ())
    return AbstractAnswer("cuda", (), None, parameters, parameters, 2 * parameters, "AdamW", activations,
                          remat_saves, "", 1, 1, (gpu,)), gpu


def test_a_step_no_one_gpu_holds_says_how_many_fully_sharded_ones_do():
    # Llama-3-70B's numbers: 141.1 GB of bf16 parameters, 6.4 GB of activations at the peak
    answer, g = _answer(141_100_000_000, 6_400_000_000)
    assert answer.sharded_gpus(g) == 8  # 564.4 GB of state over 73.6 GB of room a GPU: 7.7
    text = answer.fit_text(g)
    assert text == ("short by 490.8 GB of 80.0 GB; fully sharded (FSDP, ZeRO-3) it needs at least 8 of them: "
                    "77.0 GB each before the gathered layers")
    assert answer.as_json()["gpus"][0]["sharded_gpus"] == 8
    # remat closes the gap: no sharding said; it does not: both said
    answer, g = _answer(10_000_000_000, 45_000_000_000, remat_saves=10_000_000_000)
    assert answer.fit_text(g) == "short by 5.0 GB of 80.0 GB: --remat auto saves 10.0 GB"
    answer, g = _answer(20_000_000_000, 10_000_000_000, remat_saves=2_000_000_000)
    assert answer.fit_text(g).startswith("short by 10.0 GB of 80.0 GB: --remat auto saves 2.0 GB; fully sharded "
                                         "(FSDP, ZeRO-3) it needs at least 2 of them: 50.0 GB each")
    # activations alone past the GPU: sharding the state cannot help, and nothing claims it does
    answer, g = _answer(1_000_000_000, 90_000_000_000)
    assert answer.sharded_gpus(g) is None and "sharded" not in answer.fit_text(g)
    answer, g = _answer(1_000_000_000, 1_000_000_000)
    assert answer.sharded_gpus(g) is None and answer.fit_text(g) == "fits: 5.0 GB of 80.0 GB"
