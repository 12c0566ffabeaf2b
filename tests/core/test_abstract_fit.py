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
