"""benchmarks/step_stalls.py reads the driver's step lines and says what the CPU path did during a
slow step, from the recording's events and the steps' start times (the same clock)."""
from __future__ import annotations

import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import step_stalls  # noqa: E402


def _recording(path, events):
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, graph_id INTEGER, chain TEXT, event TEXT NOT NULL,"
                  " data TEXT, at REAL NOT NULL)")
        c.executemany("INSERT INTO events(graph_id, chain, event, data, at) VALUES (0, 'forward', ?, ?, ?)",
                      [(e, json.dumps(d), at) for e, d, at in events])
    return str(path)


def test_step_lines_with_and_without_start_times():
    out = "noise\nstep 0 900.5 100.0\nstep 1 3.5 101.0\nstep 2 4.0\nstep x\n"
    assert step_stalls._timed_steps(out) == [(900.5, 100.0), (3.5, 101.0), (4.0, 0.0)]
    assert step_stalls._steps(out) == [900.5, 3.5, 4.0]


def test_the_events_of_a_step_and_the_slowest_step_that_took_a_build(tmp_path):
    rec = _recording(tmp_path / "r.tvrec", [
        ("cpu_build", {"kernel": "f0", "state": "building"}, 10.01),
        ("kernel_path", {"kernel": "f0", "why": "inductor compiling off the training thread; torch runs"}, 10.02),
        ("cpu_build", {"kernel": "f0", "state": "built"}, 12.05),
        ("cpu_build", {"kernel": "f1", "state": "failed"}, 13.01),
    ])
    timed = [(1000.0, 0.0), (1000.0, 1.0), (50.0, 10.0), (10.0, 11.0), (100.0, 12.0), (20.0, 13.0), (10.0, 14.0)]
    assert step_stalls.events_during(rec, 10.0, 50.0) == (
        "cpu_build:building x1, kernel_path:inductor compiling off the training thread x1")
    assert step_stalls.events_during(rec, 11.0, 10.0) == "no CPU-path event"
    assert step_stalls.worst_taking_step(rec, timed, 20.0) == (
        "2 steps took a build; the slowest, step 4: 100.0 ms (5.00x median)")
    assert step_stalls.worst_taking_step(rec, timed[:4], 20.0) == "no build was taken"


def test_the_steps_while_regions_build_run_from_the_first_request_to_the_last_answer(tmp_path):
    rec = _recording(tmp_path / "r.tvrec", [
        ("cpu_build", {"kernel": "f0", "state": "building"}, 10.5),
        ("cpu_build", {"kernel": "f1", "state": "building"}, 11.5),
        ("cpu_build", {"kernel": "f0", "state": "built"}, 12.5),
        ("cpu_build", {"kernel": "f1", "state": "failed"}, 13.5),
    ])
    timed = [(1000.0, 0.0), (1000.0, 1.0), (5.0, 9.0), (600.0, 10.0), (7.0, 12.0), (8.0, 13.0), (3.0, 14.0)]
    window = step_stalls.build_window(rec)
    assert window == (10.5, 13.5, True)
    assert step_stalls.building_steps(timed, window) == [600.0, 7.0, 8.0]
    assert step_stalls._window_s(window, timed) == 3.0
    unanswered = _recording(tmp_path / "u.tvrec", [("cpu_build", {"kernel": "f0", "state": "building"}, 10.5)])
    window = step_stalls.build_window(unanswered)
    assert window[2] is False and step_stalls.building_steps(timed, window) == [600.0, 7.0, 8.0, 3.0]
    assert step_stalls._window_s(window, timed) == 14.003 - 10.5
    assert step_stalls.build_window(_recording(tmp_path / "n.tvrec", [])) == (None, None, True)
