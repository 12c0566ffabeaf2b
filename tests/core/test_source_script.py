"""``thundervis source REC train.py`` on a run whose script made no ops itself (the model lives in
another file, as in nanoGPT): the script is shown, with a note that it made no ops (issue 40)."""
from __future__ import annotations

import json
import textwrap

from core_helpers import run_cli


def test_the_runs_own_script_shows_with_a_note_that_it_made_no_ops(tmp_path, capsys, monkeypatch):
    (tmp_path / "model_def.py").write_text(textwrap.dedent("""\
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                return torch.tanh(self.fc(x)).sum()
    """))
    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom model_def import M\n\nm = torch.compile(M())\nm(torch.randn(4, 8)).backward()\n")
    out = tmp_path / "r.tvrec"
    assert run_cli(capsys, "run", "--no-view", "--executors", "torch", "-o", out, script)[0] == 0
    code, text, err = run_cli(capsys, "source", out, "train.py")
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0] == "train.py · 5 lines · made no ops (no compiled graph traced a line of it)"
    assert lines[4].endswith("m = torch.compile(M())")
    doc = json.loads(run_cli(capsys, "source", out, "train.py", "--json")[1])
    assert doc["recorded"] and not any(line["ops"] for line in doc["lines"])
    # without a FILE the view opens on the file the ops came from
    code, text, _ = run_cli(capsys, "source", out)
    assert code == 0 and text.startswith("model_def.py · 1 of 9 lines made ") and " ops in " in text
