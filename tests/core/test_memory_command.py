"""``thundervis memory`` and the ledger in ``ls --json``: totals, peak and where, the saved tensors
with the line and module that made them, the remat what-if from the recording alone, an older
recording without the tables (a sentence, no traceback) and tampered ledger rows (exit 2)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

from core_helpers import line_of, run_cli


def _copy(recorded, tmp_path) -> str:
    path = os.path.join(str(tmp_path), "copy.tvrec")
    shutil.copy(recorded[0], path)
    return path


def test_memory_json_totals_saved_tensors_and_peak(recorded, capsys):
    path, script = recorded
    code, out, err = run_cli(capsys, "memory", path, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["recorded"] and d["policy"] == "auto"
    counted = [s for s in d["saved"] if s["counted"]]
    assert d["saved_bytes"] == sum(s["storage_bytes"] for s in counted) > 0
    assert d["parameters"] > 0 and d["gradients"] > 0 and d["peak_bytes"] >= d["parameters"]
    assert d["peak_where"].startswith("graph ")
    tanh = line_of(script, "LINE_TANH")
    assert any(s["source"] == f"train_small.py:{tanh}" for s in d["saved"]), d["saved"]
    assert sum(g["bytes"] for g in d["by_line"]) == d["saved_bytes"]
    assert sum(g["bytes"] for g in d["by_module"]) == d["saved_bytes"]
    assert set(d["what_if"]) == {"off", "auto"}
    assert d["what_if"]["auto"] <= d["what_if"]["off"]
    for c in d["chains"]:
        assert c["peak_bytes"] == max(c["timeline"])


def test_memory_text_and_remat_what_if(recorded, capsys):
    code, out, err = run_cli(capsys, "memory", recorded[0], "--remat", "off")
    assert code == 0, err
    assert "saved for backward" in out and "static peak" in out and "by source line:" in out
    assert "  off " in out and "  auto " not in out
    code, out, _ = run_cli(capsys, "memory", recorded[0], "--json", "--remat", "auto")
    assert list(json.loads(out)["what_if"]) == ["auto"]


def test_ls_json_has_saved_bytes_per_step_and_chain(recorded, capsys):
    code, out, err = run_cli(capsys, "ls", recorded[0], "--json")
    assert code == 0, err
    d = json.loads(out)
    chains = [c for g in d["graphs"] for c in g["chains"] if c["kind"] == "forward"]
    assert d["saved_bytes"] == sum(c["saved_bytes"] or 0 for c in chains) > 0
    assert all(c["peak_bytes"] is not None and c["saved"] for c in chains)
    _, mem, _ = run_cli(capsys, "memory", recorded[0], "--json")
    assert json.loads(mem)["saved_bytes"] == d["saved_bytes"]


def test_older_recording_says_not_recorded(recorded, tmp_path, capsys):
    path = _copy(recorded, tmp_path)
    with sqlite3.connect(path) as c:
        for t in ("memory_graphs", "memory_saved", "memory_decisions", "memory_timeline", "memory_peaks"):
            c.execute(f"DROP TABLE {t}")
    code, out, err = run_cli(capsys, "memory", path)
    assert code == 0, err
    assert "not recorded in this recording (made by an older version)" in out
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    assert code == 0 and json.loads(out)["saved_bytes"] is None


def test_tampered_ledger_rows_exit_2(recorded, tmp_path, capsys):
    for sql in ("UPDATE memory_saved SET bytes = 'lots'", "UPDATE memory_saved SET shape = '[1, -3]'",
                "UPDATE memory_graphs SET policy = 'sometimes'", "UPDATE memory_saved SET readers = '{'",
                "UPDATE memory_timeline SET live_bytes = -1", "UPDATE memory_decisions SET auto = 'maybe'"):
        path = _copy(recorded, tmp_path)
        with sqlite3.connect(path) as c:
            c.execute(sql)
        code, out, err = run_cli(capsys, "memory", path)
        assert code == 2, (sql, out, err)
        assert "corrupted" in err and "Traceback" not in err, (sql, err)


def test_source_view_has_bytes_saved_per_line(recorded, capsys):
    path, script = recorded
    code, out, err = run_cli(capsys, "source", path, "train_small.py", "--json")
    assert code == 0, err
    lines = json.loads(out)["lines"]
    _, mem, _ = run_cli(capsys, "memory", path, "--json")
    by_line = {g["label"].split()[0]: g["bytes"] for g in json.loads(mem)["by_line"]}
    tanh = line_of(script, "LINE_TANH")
    row = next(x for x in lines if x["line"] == tanh)
    assert row["saved_bytes"] == by_line[f"train_small.py:{tanh}"] > 0
    assert row["saved_text"].startswith("saved ")
    assert all(x["saved_bytes"] == 0 for x in lines if x["line"] != tanh and not x["ops"])


def test_group_workers_get_the_remat_policy():
    from types import SimpleNamespace

    from thundervis.cli import build_parser
    from thundervis.commands.run_group import worker_run_args
    args = SimpleNamespace(executors=None, debug=False, profile=False, capture_inputs=False,
                           check_numerics=False, compare_eager=False, check_steps=0, remat="off")
    got = worker_run_args(args, "train.py", None, [])
    assert got[got.index("--remat") + 1] == "off"
    assert build_parser().parse_args(["run", "--no-view", *got]).remat == "off"
    args.remat = "auto"
    assert "--remat" not in worker_run_args(args, "train.py", None, [])
