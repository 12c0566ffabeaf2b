"""Every string from a recording that a command prints to a terminal has its control characters
made visible (``thundervis/safe_text.py``): ls, show (plain and rich-highlighted), diff (unified and
side by side, plain and rich), lineage, rerun, run's end summary and error messages quoting recorded
names. The recording here is built with escape sequences in every free-text field a writer stores.
"""
from __future__ import annotations

import os
import sys

import pytest

from thundervis.compiler.ir import BoundSymbol, SourceInfo, Trace, TensorProxy

import kernel_fixtures as kf
from core_helpers import run_cli

TITLE = "\x1b]0;pwned\x07"   # sets the terminal title
CLEAR = "\x1b[2J"            # clears the screen
BIDI = "\u202e"              # reverses the text after it
EVIL = TITLE + CLEAR + BIDI


def _assert_safe(text: str, *, rich: bool = False) -> None:
    """No escape sequence, bell or bidi control from the recording reaches the terminal."""
    assert "\x07" not in text and "\x1b]" not in text and "\x1b[2J" not in text and BIDI not in text, repr(text)
    if not rich:
        assert "\x1b" not in text, repr(text)


@pytest.fixture(scope="module")
def evil_rec(tmp_path_factory):
    """A recording whose run, graph, chains, passes, sources, kernels and failures hold escapes."""
    from thundervis.recording import RecordingObserver
    path = os.path.join(str(tmp_path_factory.mktemp("evil")), "evil.tvrec")
    a = TensorProxy("a", (4, 8), "float32", "cpu", (8, 1))
    b = TensorProxy("b", (8,), "float32", "cpu", (1,))
    t0 = TensorProxy("t0", (4, 8), "float32", "cpu", (8, 1))
    t1 = TensorProxy("t1", (4, 8), "float32", "cpu", (8, 1))
    src = SourceInfo(file=f"model{EVIL}.py", line=3, code=f"y = f(x)  # {EVIL}", module=f"fc{EVIL}")
    add = BoundSymbol("prims.add", (a, b), {}, t0, "f1", source=src, aten="aten.add.Tensor", note=EVIL)
    tanh = BoundSymbol("prims.tanh", (t0,), {}, t1, "f2", source=src, aten="aten.tanh.default")
    before = Trace("forward", (a, b), (add, tanh), (t1,), chain="forward", graph=0, pass_name="acquire")
    fused = BoundSymbol("triton_fusion_0", (a, b), {}, (t1,), "f3", origin=("f1", "f2"), source=src,
                        subsymbols=(add, tanh), executor="triton", note=EVIL)
    after = before.replace(symbols=(fused,), pass_name=f"fuse{EVIL}")
    region = kf.region_trace("cpu", f"triton_fusion_0{EVIL}")
    record = kf.kernel_record(region)
    record["source_lines"][0]["code"] = EVIL
    with RecordingObserver(path) as rec:
        rec.start_run(script=f"/tmp/train{EVIL}.py", module=None, argv=["train.py", EVIL], cwd="/tmp")
        rec.graph_started(0, {"n_inputs": 2, "n_nodes": 2, "reason": EVIL})
        rec.pass_done(0, "forward", 0, "acquire", before, 0.001, True)
        rec.pass_done(0, "forward", 1, f"fuse{EVIL}", after, 0.001, True)
        rec.kernels_built(0, "forward", [record])
        rec.chain_failed(0, "backward", f"boom {EVIL}", f"Traceback {EVIL}")
        rec.graph_finished(0, 0.01)
        rec.finish_run("failed", 1, f"Traceback (most recent call last):\n  {EVIL}")
    return path


def test_ls_and_run_summary(evil_rec, capsys):
    code, out, err = run_cli(capsys, "ls", evil_rec)
    assert code == 0, err
    _assert_safe(out)
    assert "\\x1b]0;pwned\\x07" in out  # shown, visibly
    from thundervis.commands.ls import readable, summary_text
    with readable(evil_rec) as rec:  # what `thundervis run` prints at its end
        _assert_safe(summary_text(rec, passes=False))


@pytest.mark.parametrize("extra", [["--plain"], ["--uids"], ["--pass", "0"]])
def test_show_plain(evil_rec, capsys, extra):
    code, out, err = run_cli(capsys, "show", evil_rec, *extra)
    assert code == 0, err
    _assert_safe(out)
    assert "\\x1b[2J" in out


def test_show_and_diff_with_rich_highlighting(evil_rec, capsys, monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    for argv in (["show", evil_rec], ["diff", evil_rec], ["diff", evil_rec, "--side-by-side"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, err
        assert "\x1b[" in out  # rich did highlight: its own colour codes are there
        _assert_safe(out, rich=True)


@pytest.mark.parametrize("extra", [[], ["--side-by-side"], ["--full"]])
def test_diff_plain(evil_rec, capsys, extra):
    code, out, err = run_cli(capsys, "diff", evil_rec, "--plain", *extra)
    assert code == 0, err
    _assert_safe(out)


def test_diff_of_two_runs(evil_rec, capsys):
    code, out, err = run_cli(capsys, "diff", evil_rec, evil_rec)
    assert code == 0, err
    _assert_safe(out)


def test_lineage(evil_rec, capsys):
    for argv in (["--uid", "f1"], ["--source", "model" + EVIL + ".py:3"]):
        code, out, err = run_cli(capsys, "lineage", evil_rec, *argv)
        assert code == 0, err
        _assert_safe(out)


def test_rerun_report_and_error_messages(evil_rec, capsys):
    name = f"triton_fusion_0{EVIL}"
    code, out, err = run_cli(capsys, "rerun", evil_rec, name, "--executor", "torch", "--iters", "1", "--no-store")
    assert code == 0, err
    _assert_safe(out)
    _assert_safe(err)
    # An error message quoting recorded names (the closest kernel names) stays one visible line.
    code, out, err = run_cli(capsys, "rerun", evil_rec, "triton_fusion_9")
    assert code == 2
    _assert_safe(err)
    assert len(err.strip().splitlines()) == 1 and "\\x1b" in err
