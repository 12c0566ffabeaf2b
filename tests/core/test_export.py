"""``thundervis export REC --perfetto OUT.json``: a Chrome trace of the profiled calls."""
from __future__ import annotations

import json
import os

import pytest

from core_helpers import run_cli, write_script


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    script = write_script(folder, "train_exp.py", """
        for _ in range(4):
            model(torch.randn(4, 8)).backward()
    """)
    out = os.path.join(str(folder), "exp.tvrec")
    from thundervis.cli import main
    assert main(["run", "--profile", "--warmup", "1", "--steps", "2", "--executors", "torch",
                 "--out", out, "--no-view", script]) == 0
    return out


def test_perfetto_has_one_slice_per_symbol_per_profiled_call(profiled, tmp_path, capsys):
    from thundervis.recording import open_recording
    out = tmp_path / "trace.json"
    code, stdout, _ = run_cli(capsys, "export", profiled, "--perfetto", out)
    assert code == 0 and str(out) in stdout
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] not in ("call", "untimed call")]
    with open_recording(profiled) as rec:
        tm = rec.timings()
    assert len(slices) == sum(len(k.samples_us) for k in tm.kernels) == 2 * len(tm.kernels)
    assert {e["name"] for e in slices} == {k.name for k in tm.kernels}
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(threads.values()) == ["backward (host time)", "forward (host time)"]
    calls = [e for e in events if e.get("cat") == "call"]
    assert len(calls) == 4  # 2 chains x 2 profiled calls
    for c in calls:  # kernels sit inside their call's slice on the same track
        inside = [e for e in slices if e["tid"] == c["tid"] and e["args"]["call"] == c["args"]["call"]]
        assert inside and all(c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3
                              for e in inside)


def test_untimed_calls_follow_the_profiled_ones_with_their_wall_times(profiled, tmp_path, capsys):
    from thundervis.recording import open_recording
    out = tmp_path / "trace.json"
    code, stdout, _ = run_cli(capsys, "export", profiled, "--perfetto", out)
    events = json.loads(out.read_text())["traceEvents"]
    with open_recording(profiled) as rec:
        tm = rec.timings()
    walls = {(c.graph, c.chain): c.untimed_walls_us for c in tm.chains}
    assert any(walls.values()), walls  # the fixture's run makes one untimed call per chain
    untimed = [e for e in events if e.get("cat") == "untimed call"]
    assert sorted(e["dur"] for e in untimed) == sorted(round(w, 3) for ws in walls.values() for w in ws)
    assert f"and {len(untimed)} untimed call" in stdout
    for u in untimed:  # after the profiled calls of its track, never overlapping them
        calls = [e for e in events if e.get("cat") == "call" and e["tid"] == u["tid"] and e["pid"] == u["pid"]]
        assert calls and all(c["ts"] + c["dur"] <= u["ts"] for c in calls)
        assert "(untimed)" in u["name"] and u["args"]["call"] >= len(calls)


def test_export_without_timings_says_so(tmp_path, capsys):
    script = write_script(tmp_path, "plain.py", "model(torch.randn(2, 8))\n")
    rec = tmp_path / "plain.tvrec"
    code, _, _ = run_cli(capsys, "run", "--executors", "torch", "--out", rec, "--no-view", script)
    assert code == 0
    code, _, err = run_cli(capsys, "export", rec, "--perfetto", tmp_path / "t.json")
    assert code == 2 and "--profile" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "export", tmp_path / "missing.tvrec", "--perfetto", tmp_path / "t.json")
    assert code == 2 and "does not exist" in err
