"""Fixtures for the core tests: one recorded run of a small training script, shared by many tests."""
from __future__ import annotations

import os

import pytest

from core_helpers import write_script


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """A recording of a small training script with the torch executor: two shapes (a recompile),
    forward and backward. Returns (recording path, script path)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("recorded")
    script = write_script(folder, "train_small.py", """
        for n in (4, 4, 5):
            model(torch.randn(n, 8)).backward()
        print("done", sys.argv[1:])
    """)
    out = check_output(os.path.join(str(folder), "small.tvrec"))
    result = run_target(script=script, module=None, args=["--flag", "1"], out=out, executors=["torch"])
    assert result.exit_code == 0, result
    return result.path, script
