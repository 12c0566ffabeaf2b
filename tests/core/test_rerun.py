"""``thundervis rerun``: rebuild one recorded fusion from its IR, run it with each executor, check
its numerics against the float64 reference, store the results; and its error cases."""
from __future__ import annotations

import json
import os

import pytest
import torch

from thundervis.compiler.executors import get_executor
from thundervis.rerun import (RerunError, compare, random_inputs, reference_outputs, region_trace,
                              rerun_kernel)

import kernel_fixtures as kf
from core_helpers import run_cli


def _available(name: str) -> bool:
    try:
        return get_executor(name).available() is None
    except KeyError:
        return False


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """A recording with the same region as a CPU kernel (graph 0 forward and backward) and as a
    CUDA kernel (graph 1)."""
    folder = tmp_path_factory.mktemp("rerun")
    cpu = kf.kernel_record(kf.region_trace("cpu"))
    cpu["code"] = "raise SystemExit('recorded text must never run')\n"
    cuda = kf.kernel_record(kf.region_trace("cuda:0", "triton_fusion_7"))
    return kf.make_recording(os.path.join(str(folder), "k.tvrec"),
                             [(0, "forward", cpu), (0, "backward", cpu), (1, "forward", cuda)])


@pytest.mark.parametrize("executor", ["torch", "triton", "inductor"])
def test_rerun_each_available_executor_matches_the_reference(rec, executor):
    if not _available(executor):
        pytest.skip(f"{executor} is not available here")
    report = rerun_kernel(rec, "triton_fusion_0", executor=executor, iters=2, store=False)
    (r,) = report.results
    assert r.status == "ok", r.detail
    assert r.clock == "host" and 0 < r.min_us <= r.median_us
    assert r.max_abs_error < 1e-5 and r.max_rel_error < 1e-5
    assert report.graph == 0 and report.chain == "forward" and report.inputs == "random"


def test_rerun_all_prints_a_table_and_stores_results(rec, capsys):
    from thundervis.recording import open_recording
    with open_recording(rec) as r:
        before = len(r.rerun_results())
    code, out, err = run_cli(capsys, "rerun", rec, "triton_fusion_0", "--executor", "all", "--iters", "2")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line.split()}
    here = [n for n in ("triton", "nvfuser", "inductor", "torch") if _available(n)]
    for name in ("triton", "nvfuser", "inductor", "torch"):
        # an executor not installed here is no row (not a failure): one note names it (issue 40)
        assert (rows[name].split()[1] == "ok") if name in here else name not in rows, rows.get(name)
    missing = [n for n in ("triton", "nvfuser", "inductor", "torch") if n not in here]
    notes = [line for line in out.splitlines() if line.startswith("note: left out, not available here: ")]
    assert len(notes) == (1 if missing else 0) and all(f"the {n} executor" in notes[0] for n in missing)
    assert "unavailable" not in out and "ExecutorMissing" not in out
    assert "max abs err" in out and "also recorded in graph 0 backward" in out
    with open_recording(rec) as r:
        stored = r.rerun_results()
    assert len(stored) == before + len(here)
    assert {s.executor for s in stored[-len(here):]} == set(here)
    torch_row = next(s for s in stored[-len(here):] if s.executor == "torch")
    assert torch_row.status == "ok" and torch_row.max_abs_error is not None and torch_row.kernel == "triton_fusion_0"


def test_rerun_json(rec, capsys):
    code, out, _ = run_cli(capsys, "rerun", rec, "triton_fusion_0", "--executor", "torch", "--iters", "1",
                           "--json", "--chain", "backward", "--no-store")
    assert code == 0
    doc = json.loads(out)
    assert doc["chain"] == "backward" and doc["results"][0]["executor"] == "torch"
    assert doc["results"][0]["status"] == "ok"


def test_numerics_check_catches_a_wrong_kernel(rec):
    from thundervis.recording import open_recording
    from thundervis.rerun import find_kernel
    with open_recording(rec) as r:
        region = region_trace(r.kernel_source(find_kernel(r, "triton_fusion_0")))
    inputs = random_inputs(region)
    refs = reference_outputs(region, inputs)
    good = [t.float() for t in refs]
    assert compare(good, refs)[0] < 1e-6
    bad = [good[0], good[1] + 1e-2]
    max_abs, max_rel = compare(bad, refs)
    assert max_abs == pytest.approx(1e-2, rel=1e-3) and max_rel > 1e-3
    assert compare([good[0], torch.full_like(good[1], float("nan"))], refs)[0] == float("inf")


def test_unknown_kernel_names_the_closest(rec, capsys):
    code, _, err = run_cli(capsys, "rerun", rec, "triton_fusoin_0")
    assert code == 2 and "triton_fusion_0" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_executor_exits_2(rec, capsys):
    missing = next((n for n in ("nvfuser", "inductor", "triton") if not _available(n)), None)
    if missing is None:
        pytest.skip("every executor is available here")
    code, _, err = run_cli(capsys, "rerun", rec, "triton_fusion_0", "--executor", missing)
    assert code == 2 and missing in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "rerun", rec, "triton_fusion_0", "--executor", "tvm")
    assert code == 2 and "tvm" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-CUDA path")
def test_cuda_kernel_without_cuda(rec, capsys):
    code, _, err = run_cli(capsys, "rerun", rec, "triton_fusion_7")
    assert code == 2 and "no CUDA" in err and "--device cpu" in err
    code, out, err = run_cli(capsys, "rerun", rec, "triton_fusion_7", "--device", "cpu", "--executor", "torch",
                             "--iters", "1", "--no-store")
    assert code == 0, err
    assert "recorded on cuda:0, re-run on cpu" in out and " ok " in out


def test_captured_inputs_missing_or_mismatched_fall_back_to_random(rec, tmp_path):
    report = rerun_kernel(rec, "triton_fusion_0", executor="torch", inputs="captured", iters=1, store=False)
    assert report.inputs == "random" and any("no captured inputs" in n for n in report.notes)
    from thundervis.recording.capture import save_captured_inputs
    wrong = tmp_path / "w.tvrec"
    import shutil
    shutil.copy(rec, wrong)
    save_captured_inputs(str(wrong), 0, "forward", {"kernel": "triton_fusion_0", "names": ["a", "b"],
                                                     "tensors": [torch.zeros(3, 3), torch.zeros(8)]})
    report = rerun_kernel(str(wrong), "triton_fusion_0", executor="torch", inputs="captured", iters=1,
                          store=False)
    assert report.inputs == "random" and any("the recording says float32[4, 8]" in n for n in report.notes)


def test_captured_inputs_are_used(rec, tmp_path):
    import shutil
    from thundervis.recording.capture import save_captured_inputs
    path = tmp_path / "c.tvrec"
    shutil.copy(rec, path)
    a, b = torch.full((4, 8), 0.25), torch.linspace(-1, 1, 8)
    save_captured_inputs(str(path), 0, "forward", {"kernel": "triton_fusion_0", "names": ["a", "b"],
                                                    "tensors": [a, b]})
    assert os.path.exists(str(path) + ".inputs/triton_fusion_0.safetensors")
    report = rerun_kernel(str(path), "triton_fusion_0", executor="torch", inputs="captured", iters=1,
                          store=False)
    assert report.inputs == "captured" and report.results[0].status == "ok"
    assert report.results[0].max_abs_error < 1e-6


def test_damaged_ir_is_refused_without_running_anything(rec, tmp_path, capsys):
    import shutil
    import sqlite3
    path = tmp_path / "bad.tvrec"
    shutil.copy(rec, path)
    with sqlite3.connect(path) as c:
        c.execute("UPDATE kernels SET trace_json=? WHERE name='triton_fusion_0'",
                  (json.dumps({"format": 1, "proxies": [{"name": "__import__('os')", "shape": [1],
                                                         "dtype": "float32", "device": "cpu"}]}),))
    code, _, err = run_cli(capsys, "rerun", path, "triton_fusion_0", "--executor", "torch")
    assert code == 2 and "damaged" in err


def test_python_api_errors_are_one_sentence(rec):
    with pytest.raises(RerunError, match="closest"):
        rerun_kernel(rec, "nope", store=False)
    with pytest.raises(RerunError, match="iters"):
        rerun_kernel(rec, "triton_fusion_0", iters=0, store=False)


def test_rerun_on_a_read_only_recording_prints_results_and_says_it_could_not_store(rec, tmp_path, capsys,
                                                                                monkeypatch):
    import shutil
    import stat
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "k.tvrec"
    shutil.copy(rec, path)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP)
    os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)
    if os.geteuid() == 0:  # root writes through permissions: make the store fail as it would for a user
        import thundervis.recording.results as results
        monkeypatch.setattr(results, "writable", lambda p: False)
    try:
        code, out, err = run_cli(capsys, "rerun", path, "triton_fusion_0", "--executor", "torch", "--iters", "1")
    finally:
        os.chmod(folder, stat.S_IRWXU)
    assert code == 0, err
    assert "torch" in out and " ok " in out  # the results are printed
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "could not store the results" in err


def test_the_tui_rerun_leaves_out_executors_not_installed_here(rec):
    """The kernels screen's re-run (tui.data) asks each executor in turn: one not installed here
    (nvFuser without CUDA) is a note, not a "failed ExecutorMissing" row (issue 40)."""
    from thundervis.tui.data import open_data
    from types import SimpleNamespace
    data = open_data(rec)
    kernel = SimpleNamespace(name="triton_fusion_0", graph=0, chain="forward")
    out = data.rerun(kernel, executors=("torch", "nvfuser"))
    executors = [row[0] for row in out.rows]
    assert all(row[1] != "failed" and "ExecutorMissing" not in str(row[5]) for row in out.rows), out.rows
    if _available("nvfuser"):
        assert executors == ["torch", "nvfuser"]
    else:
        assert executors == ["torch"] and out.error is None
        assert out.notes[0] == ("left out, not available here: the nvfuser executor is not available: "
                                + get_executor("nvfuser").available().rstrip("."))
