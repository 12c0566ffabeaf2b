"""``thundervis view`` and the end of ``thundervis run``: bad input exits 2 with one sentence before
any UI starts; the TUI imports neither torch nor the compiler pipeline."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from thundervis.cli import main


class _TTY:
    """A stand-in stream that says it is a terminal."""

    def __init__(self, stream):
        self._stream = stream

    def isatty(self):
        return True

    def __getattr__(self, name):
        return getattr(self._stream, name)


@pytest.fixture
def no_ui(monkeypatch):
    """Fail the test if the UI would start."""
    import thundervis.tui.launch as app

    def boom(*a, **k):
        raise AssertionError("the UI started")
    monkeypatch.setattr(app, "run_app", boom)


def _bad_files(tmp_path):
    corrupt = tmp_path / "corrupt.tvrec"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    garbage = tmp_path / "garbage.tvrec"
    garbage.write_bytes(b"this is not a recording at all\n" * 40)
    foreign = tmp_path / "foreign.tvrec"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t(x)")
    return {"corrupt": corrupt, "garbage": garbage, "foreign": foreign, "missing": tmp_path / "nope.tvrec"}


@pytest.mark.parametrize("kind", ["corrupt", "garbage", "foreign", "missing"])
def test_bad_recording_exits_2_before_the_ui(kind, tmp_path, capsys, monkeypatch, no_ui):
    path = _bad_files(tmp_path)[kind]
    monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
    monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    code = main(["view", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("thundervis: ") and err.count("\n") == 1 and "Traceback" not in err


def test_view_needs_a_terminal(small_rec, capsys, no_ui):
    code = main(["view", small_rec])
    assert code == 2
    assert "needs a terminal" in capsys.readouterr().err


def test_view_runs_the_app_on_a_terminal(small_rec, monkeypatch):
    import thundervis.api as api
    seen = {}

    def fake_run(data, poll_s, group=None, rank=None):
        seen.update(path=data.path, poll=poll_s)
        data.close()
        return 0
    monkeypatch.setattr(api, "run_tui", fake_run)
    monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
    monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    assert main(["view", small_rec, "--poll", "0.5"]) == 0
    assert seen == {"path": os.path.abspath(small_rec), "poll": 0.5}


def test_run_opens_the_viewer_only_on_a_terminal(monkeypatch, tmp_path):
    from thundervis.commands import run as run_cmd
    import thundervis.api as api
    opened = []
    monkeypatch.setattr(api, "view_recording", lambda path: opened.append(path))
    assert run_cmd.open_viewer("x.tvrec") is True and opened == ["x.tvrec"]

    def broken(path):
        raise RuntimeError("no terminal")
    monkeypatch.setattr(api, "view_recording", broken)
    assert run_cmd.open_viewer("x.tvrec") is False  # the recording is still reported


def test_tui_imports_without_torch(small_rec):
    code = ("import sys\n"
            "from thundervis.tui.data import open_data\n"
            "import thundervis.tui.app\n"
            f"d = open_data({small_rec!r})\n"
            "ov = d.overview()\n"
            "d.trace_lines(0, 'forward', 6)\n"
            "d.diff_rows(0, 'forward', 5, 6, False, 3)\n"
            "bad = [m for m in ('torch', 'triton', 'thundervis.compiler.backend') if m in sys.modules]\n"
            "print('LOADED', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_tui_has_no_sql():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "tui")
    for name in os.listdir(root):
        if name.endswith(".py"):
            text = open(os.path.join(root, name), encoding="utf-8").read()
            assert "sqlite3" not in text and "SELECT " not in text, name


# -- groups (thundervis view GROUP, the end of thundervis run --nproc-per-node) ------------------

def _bad_groups(tmp_path, identical_group):
    empty = tmp_path / "empty.tvgroup"
    empty.mkdir()
    launch_only = tmp_path / "launch.tvgroup"
    launch_only.mkdir()
    (launch_only / "launch-node0.json").write_text('{"format": "thundervis-launch", "status": "running"}')
    orphan = tmp_path / "orphan.tvgroup"  # a rank file sent without the recording it stands on
    orphan.mkdir()
    import shutil
    shutil.copy(os.path.join(identical_group, "rank-00001.tvrank"), orphan / "rank-00001.tvrank")
    return {"empty": ([str(empty)], "without rank recordings"),
            "launch only": ([str(launch_only)], "holds no rank recordings"),
            "orphan rank file": ([str(orphan)], "copy the whole group folder"),
            "no such rank": ([identical_group, "--rank", "7"], "has no rank 7 (recorded ranks: 0, 1)"),
            "rank of a recording": ([os.path.join(identical_group, "rank-00000.tvrec"), "--rank", "0"],
                                    "--rank picks a rank of a group folder")}


@pytest.mark.parametrize("kind", ["empty", "launch only", "orphan rank file", "no such rank", "rank of a recording"])
def test_bad_group_exits_2_before_the_ui(kind, tmp_path, identical_group, capsys, monkeypatch, no_ui):
    argv, says = _bad_groups(tmp_path, identical_group)[kind]
    monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
    monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    code = main(["view", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("thundervis: ") and err.count("\n") == 1 and "Traceback" not in err
    assert says in err


def test_view_runs_the_app_on_a_group(identical_group, monkeypatch):
    import thundervis.api as api
    seen = {}

    def fake_run_app(data, poll_s, group=None, rank=None):
        seen.update(path=data.path, group=group.path, rank=rank)
        group.close()
        return 0
    monkeypatch.setattr(api, "run_tui", fake_run_app)
    monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
    monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    assert main(["view", identical_group, "--rank", "1"]) == 0
    assert seen == {"path": os.path.join(identical_group, "rank-00001.tvrank"), "group": identical_group, "rank": 1}
    assert main(["view", identical_group]) == 0 and seen["rank"] == 0


def test_view_of_a_group_needs_a_terminal(identical_group, capsys, no_ui):
    assert main(["view", identical_group]) == 2
    assert "needs a terminal" in capsys.readouterr().err


def _fake_launch(monkeypatch, status="ok"):
    """Make ``thundervis run --nproc-per-node 2`` write a synthetic group instead of running torchrun."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from _synthetic_group import write_group

    from thundervis import distributed

    def launch_group(*, group_dir, torchrun_args, run_args, target, node_rank=0):
        write_group(os.path.dirname(group_dir), variants=(0, 0), name=os.path.basename(group_dir))
        return distributed.GroupResult(0 if status == "ok" else 1, status, group_dir, ())
    monkeypatch.setattr(distributed, "launch_group", launch_group)


@pytest.mark.parametrize("tty,no_view,status,opens", [
    (True, False, "ok", True), (True, True, "ok", False), (False, False, "ok", False),
    (True, False, "failed", True), (True, False, "interrupted", False)])
def test_run_with_nproc_ends_in_the_ui_on_the_group(tty, no_view, status, opens, tmp_path, monkeypatch, capsys):
    from thundervis.commands import run as run_cmd
    _fake_launch(monkeypatch, status)
    opened = []
    monkeypatch.setattr(run_cmd, "open_viewer", lambda path: opened.append(path) or True)
    if tty:
        monkeypatch.setattr(sys, "stdout", _TTY(sys.stdout))
        monkeypatch.setattr(sys, "stdin", _TTY(sys.stdin))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    out = tmp_path / "job.tvgroup"
    argv = ["run", "--nproc-per-node", "2", "--executors", "torch", "--out", str(out)] + (
        ["--no-view"] if no_view else []) + [str(script)]
    main(argv)
    assert opened == ([str(out)] if opens else [])
    assert "thundervis view" in capsys.readouterr().out
