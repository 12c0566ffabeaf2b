"""Fixtures for the notebook widget tests: one recorded run of a tiny model whose file name, source
lines and module path are hostile HTML (default executors: a Triton fusion per chain)."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Each string, if it ever reached a page as markup, would set window.__tv_pwned or open a dialog.
HOSTILE_FILE = "evil_<img src=x onerror=window.__tv_pwned=1>.py"
HOSTILE_MODULE = "<img src=x onerror=alert(2)>"
HOSTILE_CODE = "<script>window.__tv_pwned=3</script>"
HOSTILE_CODE2 = '</pre><b onmouseover="window.__tv_pwned=4">bold</b>'

HOSTILE_SCRIPT = textwrap.dedent(f"""\
    import torch

    EVIL = {HOSTILE_MODULE!r}


    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module(EVIL, torch.nn.Linear(8, 8))

        def forward(self, x):
            h = torch.tanh(self._modules[EVIL](x))  # {HOSTILE_CODE}
            return (h * h).sum()  # {HOSTILE_CODE2}


    torch.manual_seed(0)
    model = torch.compile(M())
    model(torch.randn(4, 8)).backward()
""")


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """Return the path of a recording of ``HOSTILE_SCRIPT`` (forward and backward, one Triton
    fusion each), whose file name, source lines and module path are HTML."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("hostile")
    script = folder / HOSTILE_FILE
    script.write_text(HOSTILE_SCRIPT)
    out = check_output(str(folder / "hostile.tvrec"))
    result = run_target(script=str(script), module=None, args=[], out=out)
    assert result.exit_code == 0, result
    return result.path
