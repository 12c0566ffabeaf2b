"""Measured memory (``run --profile``): what a call really allocated at its highest, from the
profiler's allocator events; stored in ``memory_measured`` and shown beside the static peak by
``memory`` and ``ls``; a recording made before the table says so; a tampered row exits 2."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
import torch
from core_helpers import run_cli

from thundervis.compiler.memory_measure import input_storage_bytes, measured_call
from thundervis.present.memory import apart

METHOD = "torch.profiler memory events (CPU allocator)"


def test_measured_call_sees_the_transient_peak():
    x = torch.randn(256, 1024)
    n = x.numel() * x.element_size()

    def fn(args):
        a = args[0] * 2
        b = a + 1  # a and b live together: 2n, then a is freed
        del a
        return b.sum()

    out, data = measured_call(fn, [x], "cpu")
    assert torch.isclose(out, (x * 2 + 1).sum())
    assert data["method"] == METHOD
    assert 2 * n <= data["peak_bytes"] < 3 * n


def test_backward_baseline_counts_input_storages_once_tangents_included():
    s = torch.zeros(100)
    # A backward's incoming gradient is live at its start too (it frees it as it goes).
    assert input_storage_bytes(["a", "a_view", "grad_out_0"], [s, s[:10], torch.zeros(1000)], "backward") == 4400
    assert input_storage_bytes(["a"], [s], "forward") == 0


def test_backward_baseline_leaves_out_parameters_and_their_views():
    # A saved weight is allocated before the step and counted once, in the parameters line.
    w, a = torch.nn.Parameter(torch.zeros(64, 64)), torch.zeros(100)
    assert input_storage_bytes(["w", "w_t", "a", "grad_out_0"], [w, w.t(), a, torch.zeros(10)], "backward") == 440


def test_apart_wording():
    assert apart(95, 100) == "static 5.0% below measured: within 10%"
    assert apart(150, 100).startswith("static 50.0% above measured: more than 10% apart")


def _with_measured(recorded, tmp_path, rows) -> str:
    path = os.path.join(str(tmp_path), "measured.tvrec")
    shutil.copy(recorded[0], path)
    with sqlite3.connect(path) as c:
        c.execute("DELETE FROM memory_measured")
        c.executemany("INSERT INTO memory_measured VALUES (?,?,?,?,?,?)", rows)
    return path


def test_memory_and_ls_show_measured_beside_static(recorded, tmp_path, capsys):
    _, out, _ = run_cli(capsys, "memory", recorded[0], "--json")
    d = json.loads(out)
    graph, static = int(d["peak_where"].split()[1]), d["peak_bytes"]  # the graph whose step peak it is
    _, out, _ = run_cli(capsys, "memory", recorded[0], "--json", "--graph", str(graph))
    d = json.loads(out)  # one graph: its parameters are the report's
    bw = max(c["peak_bytes"] for c in d["chains"] if c["graph"] == graph)
    path = _with_measured(recorded, tmp_path, [(graph, "forward", "cpu", METHOD, 0, 10),
                                               (graph, "backward", "cpu", METHOD, bw // 2, bw // 2 + 7)])
    code, out, err = run_cli(capsys, "memory", path, "--json", "--graph", str(graph))
    assert code == 0, err
    m = json.loads(out)
    measured = d["parameters"] + bw // 2 + bw // 2 + 7
    assert m["measured_peak_bytes"] == measured and m["measured_method"] == METHOD
    assert m["measured"] == apart(static, measured)
    assert {c["chain"]: c["measured_peak_bytes"] for c in m["chains"] if c["graph"] == graph}["forward"] == 10
    code, out, _ = run_cli(capsys, "memory", path)
    assert "measured peak" in out and apart(static, measured) in out  # the whole step: same top graph
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    j = json.loads(out)
    assert j["memory_peak"]["measured_bytes"] == measured
    assert any(c.get("measured_peak_bytes") == 10 for g in j["graphs"] for c in g["chains"])
    code, out, _ = run_cli(capsys, "ls", path)
    assert "memory peak: static" in out and "measured" in out


def test_not_measured_and_older_recordings(recorded, tmp_path, capsys):
    path = _with_measured(recorded, tmp_path, [])
    _, out, _ = run_cli(capsys, "memory", path)
    assert "not measured (run with --profile to measure it)" in out
    with sqlite3.connect(path) as c:
        c.execute("DROP TABLE memory_measured")
    code, out, err = run_cli(capsys, "memory", path)
    assert code == 0, err
    assert "not measured in this recording (made by an older version)" in out


def test_tampered_measured_row_exits_2(recorded, tmp_path, capsys):
    path = _with_measured(recorded, tmp_path, [(0, "sideways", "cpu", METHOD, 0, 1)])
    code, out, err = run_cli(capsys, "memory", path)
    assert code == 2 and "memory_measured.chain" in err and "Traceback" not in err
    path = _with_measured(recorded, tmp_path, [(0, "forward", "cpu", METHOD, 0, -5)])
    code, out, err = run_cli(capsys, "memory", path)
    assert code == 2 and "Traceback" not in err


def test_widget_memory_tab_svg_marks_the_peak_and_old_recordings_say_so(recorded, tmp_path):
    pytest.importorskip("matplotlib")
    from notebook_ext.memory_plot import memory_tab
    from thundervis.recording.reader import open_recording
    with open_recording(recorded[0]) as rec:
        tab = memory_tab(rec)
    assert tab["recorded"] and tab["peak_line"].startswith("memory peak: static")
    assert tab["svg"].lstrip().startswith("<?xml") and 'id="peak"' in tab["svg"] and "backward" in tab["svg"]
    path = os.path.join(str(tmp_path), "old.tvrec")
    shutil.copy(recorded[0], path)
    with sqlite3.connect(path) as c:
        for t in ("memory_graphs", "memory_saved", "memory_decisions", "memory_timeline", "memory_peaks"):
            c.execute(f"DROP TABLE {t}")
    with open_recording(path) as rec:
        tab = memory_tab(rec)
    assert not tab["recorded"] and tab["svg"] is None
    assert tab["message"] == "not recorded in this recording (made by an older version)"
