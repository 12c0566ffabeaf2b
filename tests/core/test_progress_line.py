"""The live compile status line of ``thundervis run``: on a terminal one line on stderr, redrawn per
pass and erased when compiling is done; absent when stderr is not a terminal. The same progress is
readable from a live recording (``present.progress.recorded_progress``)."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import pytest

from core_helpers import write_script
from thundervis.present.progress import CompileProgress, recorded_progress
from thundervis.progress import ProgressLine, progress_observer

ERASE = "\r\x1b[2K"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_line_is_redrawn_per_pass_and_erased_when_the_chain_is_compiled():
    out = _Tty()
    line = ProgressLine(out, pass_total=9)
    line.pass_done(0, "dynamo", 0, "acquire", None, 0.0, True)
    line.pass_done(0, "forward", 5, "claim", None, 0.0, True)
    line.kernels_built(0, "forward", [object(), object()])
    line.pass_done(0, "forward", 6, "fuse", None, 0.0, True)
    assert line.current == CompileProgress(0, "forward", 6, 9, "fuse", 2)
    line.note("anything", {})  # what the recorder also hears is ignored
    line.pass_done(0, "forward", 8, "codegen", None, 0.0, True)
    text = out.getvalue()
    assert f"{ERASE}thundervis: compiling graph 0 · dynamo · pass 1/1 acquire · 0 kernels built" in text
    assert f"{ERASE}thundervis: compiling graph 0 · forward · pass 6/9 claim · 0 kernels built" in text
    assert f"{ERASE}thundervis: compiling graph 0 · forward · pass 7/9 fuse · 2 kernels built" in text
    assert text.endswith(ERASE) and line.current is None


def test_no_line_unless_stderr_is_a_terminal():
    assert progress_observer(io.StringIO()) is None
    assert isinstance(progress_observer(_Tty()), ProgressLine)


class _Pass:
    def __init__(self, index, name):
        self.index, self.name = index, name


class _Chain:
    def __init__(self, kind, status, passes):
        self.kind, self.status, self.passes = kind, status, passes


class _Graph:
    def __init__(self, id, chains, kernels=()):
        self.id, self.chains, self.kernels = id, chains, kernels


class _Overview:
    def __init__(self, graphs):
        self.graphs = graphs


def test_a_live_recording_says_where_compiling_is():
    ov = _Overview([_Graph(0, [_Chain("forward", "compiled", [_Pass(8, "codegen")]),
                               _Chain("backward", "compiling", [_Pass(0, "acquire"), _Pass(1, "decompose")])],
                           kernels=(1, 2, 3))])
    p = recorded_progress(ov)
    assert p.text() == "compiling graph 0 · backward · pass 2/9 decompose · 3 kernels built"
    assert recorded_progress(_Overview([_Graph(0, [_Chain("forward", "compiled", [_Pass(8, "codegen")])])])) is None


def _run(tmp_path, stderr_tty: bool) -> str:
    script = write_script(tmp_path, "train_progress.py", """
        model(torch.randn(4, 8)).backward()
        print("trained")
    """)
    cmd = [sys.executable, "-m", "thundervis", "run", "--no-view", "--executors", "torch",
           "--out", str(tmp_path / f"p{int(stderr_tty)}.tvrec"), script]
    env = {**os.environ, "COLUMNS": "200"}
    if not stderr_tty:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        return done.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    os.close(master)
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_thundervis_run_shows_the_line_on_a_terminal_and_erases_it(tmp_path):
    err = _run(tmp_path, stderr_tty=True)
    assert "thundervis: compiling graph 0 · forward · pass" in err
    last = err.rindex("thundervis: compiling graph")
    assert ERASE in err[last:], "the line is erased once compiling is done"


def test_thundervis_run_has_no_line_when_stderr_is_a_pipe(tmp_path):
    err = _run(tmp_path, stderr_tty=False)
    assert "compiling graph" not in err and "\x1b[2K" not in err
