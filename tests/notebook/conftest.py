"""Fixtures for the notebook widget tests: one recorded run of a tiny model whose file name, source
lines and module path are hostile HTML (default executors: a Triton fusion per chain)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from notebook_helpers import HOSTILE_FILE, HOSTILE_SCRIPT  # noqa: E402


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
