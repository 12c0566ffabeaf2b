"""``--check-numerics`` in multi-process runs: every rank checks its own kernels, a packed rank file
keeps its own numerics rows (not its variant's), and ``thundervis numerics GROUP [--rank R]``."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
from types import SimpleNamespace

import pytest

from thundervis.recording import open_recording
from thundervis.recording.group import open_group
from thundervis.recording.group_store import pack_group

from core_helpers import run_cli, write_script
from test_group import _group


def _checked_run(tmp_path, capsys) -> str:
    """Record a small model with ``--check-numerics --compare-eager``; return the recording."""
    script = write_script(tmp_path, "ranked.py", """
        x = torch.randn(4, 8)
        for _ in range(2):
            model(x).backward()
    """)
    out = str(tmp_path / "rank0.tvrec")
    code, text, err = run_cli(capsys, "run", "--no-view", "--out", out, "--check-numerics", "--compare-eager", script)
    assert code == 0, text + err
    return out


def _checks(rec) -> list[tuple]:
    return [(k.chain, k.kernel, k.verdict, k.max_abs_error, k.eager_abs_error) for k in rec.kernel_numerics()]


def test_each_rank_keeps_its_own_numerics_and_numerics_reads_the_group(tmp_path, capsys):
    first = _checked_run(tmp_path, capsys)
    # A second rank of the same variant (same traces) whose checks found other errors, one kernel
    # flagged: what a rank on other data, or with a faulty device, records.
    second = str(tmp_path / "rank1.tvrec")
    shutil.copy(first, second)
    c = sqlite3.connect(second)
    with c:
        c.execute("UPDATE kernel_numerics SET max_abs_error = max_abs_error * 3 + 1e-3")
        bad = c.execute("SELECT kernel FROM kernel_numerics ORDER BY kernel LIMIT 1").fetchone()[0]
        c.execute("UPDATE kernel_numerics SET verdict = 'flagged' WHERE kernel = ?", (bad,))
        c.execute("UPDATE eager_comparisons SET max_abs_delta = 0.5")
    c.close()
    own = []
    for p in (first, second):
        with open_recording(p) as rec:
            own.append((_checks(rec), [e.max_abs_delta for e in rec.eager_comparisons()]))
    assert own[0][0] and own[0] != own[1]
    group = _group(tmp_path, [first, second])
    pack_group(group)
    assert os.path.exists(os.path.join(group, "rank-00001.tvrank")), "rank 1 stands on rank 0's recording"
    g = open_group(group)
    for rank in (0, 1):
        rec = g.open_rank(rank)
        try:
            assert (_checks(rec), [e.max_abs_delta for e in rec.eager_comparisons()]) == own[rank]
        finally:
            rec.close()

    n = len(own[0][0])
    code, out, err = run_cli(capsys, "numerics", group)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("rank 0") and lines[0].endswith(f"{n} kernels checked · 0 flagged")
    assert lines[1].startswith("rank 1") and lines[1].endswith(f"{n} kernels checked · 1 flagged: {bad}")
    assert "--rank R" in lines[2] and lines[-1] == f"2 ranks · {2 * n} kernels checked · 1 flagged"
    code, out, _ = run_cli(capsys, "numerics", group, "--flagged")
    assert code == 0 and out.startswith("rank 1") and "rank 0" not in out
    code, out, _ = run_cli(capsys, "numerics", group, "--rank", 1)
    assert code == 0 and out.rstrip().endswith(f"{n} kernels checked · 1 flagged")
    code, out, _ = run_cli(capsys, "numerics", group, "--json")
    doc = json.loads(out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["checked"] == 2 * n and doc["flagged"] == 1
    code, out, err = run_cli(capsys, "numerics", group, "--rank", 7)
    assert code == 2 and "has no rank 7" in err and len(err.strip().splitlines()) == 1


def test_a_group_without_checks_is_one_sentence(recorded, tmp_path, capsys):
    path, _ = recorded
    group = _group(tmp_path, [path, path])
    code, out, err = run_cli(capsys, "numerics", group)
    assert code == 2 and not out
    assert "no rank of" in err and "--check-numerics" in err and len(err.strip().splitlines()) == 1


def test_rank_files_of_recordings_older_than_the_numerics_tables_still_open(recorded, tmp_path):
    path, _ = recorded
    old = str(tmp_path / "old.tvrec")
    shutil.copy(path, old)
    c = sqlite3.connect(old)
    with c:
        c.execute("DROP TABLE IF EXISTS kernel_numerics")
        c.execute("DROP TABLE IF EXISTS eager_comparisons")
    c.close()
    group = _group(tmp_path, [old, old])
    pack_group(group)
    rec = open_group(group).open_rank(1)
    try:
        assert rec.kernel_numerics() == [] and rec.graphs()
    finally:
        rec.close()


def test_workers_get_the_numerics_flags():
    from thundervis.commands.run_group import worker_run_args
    args = SimpleNamespace(executors=None, debug=False, profile=False, capture_inputs=False,
                           check_numerics=True, compare_eager=True, check_steps=3)
    got = worker_run_args(args, "train.py", None, ["--lr", "1"])
    assert got[:4] == ["--check-numerics", "--compare-eager", "--check-steps", "3"]
    assert got[-3:] == [os.path.abspath("train.py"), "--lr", "1"]
    args.check_numerics = args.compare_eager = False
    assert "--check-steps" not in worker_run_args(args, "train.py", None, [])


@pytest.mark.slow
def test_check_numerics_under_torchrun_checks_every_rank(tmp_path, capsys):
    from test_distributed_runs import EXAMPLE, _thundervis_run
    group = tmp_path / "ddp.tvgroup"
    r = _thundervis_run(group, "--check-numerics", EXAMPLE, "--steps", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    g = open_group(str(group))
    assert g.ranks() == [0, 1]
    for rank in (0, 1):
        rec = g.open_rank(rank)
        try:
            checks = rec.kernel_numerics()
            assert checks and all(k.verdict == "ok" for k in checks), [(k.kernel, k.verdict) for k in checks]
        finally:
            rec.close()
    code, out, _ = run_cli(capsys, "numerics", group)
    assert code == 0 and out.rstrip().endswith(" 0 flagged") and out.startswith("rank 0")


def test_a_chain_calls_checks_are_written_together_even_when_it_raises(tmp_path):
    from thundervis.compiler.numerics_hooks import flushed_after
    from thundervis.recording import RecordingObserver
    path = str(tmp_path / "batched.tvrec")
    obs = RecordingObserver(path)
    obs.start_run(script=None, module="m", argv=[], cwd=str(tmp_path), executors=None)
    pending = []

    def flush():
        if pending:
            obs.runtime(0, "forward", "numerics", list(pending))
            pending.clear()

    def chain(args):
        pending.extend({"kernel": k, "verdict": "ok", "max_abs": args[0], "max_rel": args[0]}
                       for k in ("fw_fusion_0", "fw_fusion_1"))
        if args[0] > 1:
            raise RuntimeError("the user's step failed after the kernels ran")
        return args[0]

    run = flushed_after(chain, flush)
    assert run([0.5]) == 0.5 and not pending
    with pytest.raises(RuntimeError):
        run([2.0])
    assert not pending, "what was checked before the error is recorded"
    obs.runtime(0, "forward", "numerics", [{"kernel": "fw_fusion_1", "verdict": "flagged", "max_rel": 0.1}, 7])
    obs.finish_run("ok", 0)
    obs.close()
    with open_recording(path) as rec:
        rows = {k.kernel: k for k in rec.kernel_numerics()}
    assert set(rows) == {"fw_fusion_0", "fw_fusion_1"}
    assert rows["fw_fusion_0"].calls == 2 and rows["fw_fusion_0"].max_abs_error == 2.0
    assert rows["fw_fusion_1"].calls == 3 and rows["fw_fusion_1"].verdict == "flagged"
