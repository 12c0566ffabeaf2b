"""Fixtures for the notebook widget tests: one recorded run of a tiny model whose file name, source
lines and module path are hostile HTML (default executors: a Triton fusion per chain), and groups
of rank recordings built from recordings (see group_fixtures.py)."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from notebook_helpers import (COMM_FILE, COMM_SCRIPT, FELL_BACK_ERROR, GROUP_SCRIPT, HOSTILE_FILE,  # noqa: E402
                              HOSTILE_GROUP, HOSTILE_HOST, HOSTILE_SCRIPT, HOSTILE_TARGET)


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


@pytest.fixture(scope="session")
def profiled_group(tmp_path_factory):
    """Return (group folder, (graph, chain, name) of the most skewed kernel): 4 profiled rank
    recordings of a job of 5 ranks (rank 4 never recorded): ranks 0 and 1 ran ``GROUP_SCRIPT`` with
    ``4 tanh``, rank 2 with ``4 sigmoid`` (a variant with other code), rank 3 with ``6 tanh`` (a
    variant with other shapes); synthetic kernel medians (group_fixtures), rank 1 10x slower than
    rank 0 on one kernel; rank 1's host is hostile HTML. Packed: rank 1 is a .tvrank."""
    from group_fixtures import RANK_MEDIAN_MS, SLOW_MS, make_group, set_timings, unique_kernel
    from thundervis.compiler.profiling import ProfileSettings
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("group")
    script = folder / "train_ranks.py"
    script.write_text(GROUP_SCRIPT)
    runs = {}
    for args in (("4", "tanh"), ("4", "sigmoid"), ("6", "tanh")):
        out = check_output(str(folder / f"{'-'.join(args)}.tvrec"))
        result = run_target(script=str(script), module=None, args=list(args), out=out, executors=["torch"],
                            profile=ProfileSettings(timing=True, warmup=1, steps=2))
        assert result.exit_code == 0, result
        runs[args] = result.path
    sources = []
    slow = unique_kernel(runs[("4", "tanh")])
    for rank, args in enumerate((("4", "tanh"), ("4", "tanh"), ("4", "sigmoid"), ("6", "tanh"))):
        path = str(folder / f"rank{rank}.tvrec")
        shutil.copy(runs[args], path)
        set_timings(path, RANK_MEDIAN_MS[rank], slow + (SLOW_MS,) if rank == 1 else None)
        sources.append(path)
    group = make_group(str(folder / "job.tvgroup"), sources, world=5,
                       hosts={0: "node-a", 1: HOSTILE_HOST, 2: "node-b", 3: "node-c"})
    return group, slow


@pytest.fixture(scope="session")
def hostile_group(tmp_path_factory, hostile):
    """Return a packed group of 2 ranks of the (unprofiled) hostile recording, in a folder whose
    name is hostile HTML, rank 1's host and the launch's target hostile too."""
    from group_fixtures import make_group
    folder = tmp_path_factory.mktemp("hostile_group")
    return make_group(str(folder / HOSTILE_GROUP), [hostile, hostile], world=2, hosts={1: HOSTILE_HOST},
                      target=["train.py", HOSTILE_TARGET])


@pytest.fixture(scope="session")
def comm_recording(tmp_path_factory):
    """Return the path of a recording of ``COMM_SCRIPT`` (torch executor): a functional all-reduce
    traced into the forward (and its wait), the script's all-reduces and barrier recorded between
    the compiled calls; the script's file name is hostile HTML, so every recorded source line is."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("comm")
    script = folder / COMM_FILE
    script.write_text(COMM_SCRIPT)
    out = check_output(str(folder / "comm.tvrec"))
    result = run_target(script=str(script), module=None, args=[], out=out, executors=["torch"])
    assert result.exit_code == 0, result
    return result.path


@pytest.fixture(scope="session")
def fell_back(tmp_path_factory):
    """Return (path, kernel name) of a recording of ``HOSTILE_SCRIPT`` (triton and torch executors)
    whose first Triton kernel failed on its first launch with :data:`FELL_BACK_ERROR`, so it ran
    its region in torch at run time (a ``kernel_fallback`` event)."""
    from fallback_fixtures import fail_first_launch
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("fell_back")
    script = folder / HOSTILE_FILE
    script.write_text(HOSTILE_SCRIPT)
    mp = pytest.MonkeyPatch()
    failed = fail_first_launch(mp, FELL_BACK_ERROR)
    try:
        result = run_target(script=str(script), module=None, args=[], out=check_output(str(folder / "fb.tvrec")),
                            executors=["triton", "torch"])
    finally:
        mp.undo()
    assert result.exit_code == 0 and failed, result
    return result.path, failed[0]
