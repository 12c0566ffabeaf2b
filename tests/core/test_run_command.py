"""``thundervis run``: like ``python SCRIPT ARGS``, recorded, and nothing lost whatever happens."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from thundervis.recording import open_recording
from thundervis.runner import default_output

from core_helpers import run_cli, write_script


def _passes(path):
    with open_recording(path) as rec:
        return rec.run(), {(g.id, c.kind): [p.name for p in c.passes] for g in rec.graphs() for c in g.chains}


def test_run_is_like_python_script_args(tmp_path, capsys):
    (tmp_path / "helper_mod.py").write_text("VALUE = 41\n")
    script = write_script(tmp_path, "train.py", """
        import json, helper_mod
        model(torch.randn(4, 8)).backward()
        json.dump({"argv": sys.argv, "name": __name__, "value": helper_mod.VALUE},
                  open(sys.argv[1], "w"))
    """)
    report = tmp_path / "report.json"
    out = tmp_path / "out" / "r.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "--out", out, script, report, "--lr", "3")
    assert code == 0, err
    seen = json.loads(report.read_text())
    assert seen == {"argv": [script, str(report), "--lr", "3"], "name": "__main__", "value": 41}
    assert str(os.path.relpath(out)) in stdout or str(out) in stdout
    assert "thundervis ls" in stdout
    run, passes = _passes(str(out))
    assert run.status == "ok" and run.exit_code == 0
    assert passes[(0, "forward")][-1] == "codegen" and passes[(0, "backward")][-1] == "codegen"
    assert sys.argv[0] != script and str(tmp_path) not in sys.path  # restored


def test_backend_name_and_executors_option_record_too(tmp_path, capsys):
    script = write_script(tmp_path, "named.py", """
        import torch
        import torch._dynamo

        def f(x):
            return torch.sin(x) * 2
        g = torch.compile(f, backend="thundervis")
        g(torch.randn(3))
        # bypasses the torch.compile wrapper: the backend's process defaults must record too
        h = torch._dynamo.optimize("thundervis")(lambda x: torch.cos(x) + 1)
        h(torch.randn(3))
    """, with_model=False)
    out = tmp_path / "n.tvrec"
    code, _, err = run_cli(capsys, "run", "--no-view", "--executors", "torch", "-o", out, script)
    assert code == 0, err
    run, passes = _passes(str(out))
    assert run.executors == ["torch"] and passes[(0, "inference")][-1] == "codegen"
    assert passes[(1, "inference")][-1] == "codegen"


def test_module_mode(tmp_path, capsys, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write_script(pkg, "train.py", """
        import json
        model(torch.randn(2, 8)).backward()
        open(sys.argv[1], "w").write(__name__)
        json.dump(sys.argv, open("argv.json", "w"))
    """)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "run", "--no-view", "-o", "m.tvrec", "-m", "mypkg.train", "marker.txt",
                           "--steps", "3", "--foo", "-o", "x")
    assert code == 0, err
    assert (tmp_path / "marker.txt").read_text() == "__main__"
    # Every argument after the module is the module's, like python -m (issue 11).
    assert json.loads((tmp_path / "argv.json").read_text())[1:] == ["marker.txt", "--steps", "3", "--foo", "-o", "x"]
    run, passes = _passes(str(tmp_path / "m.tvrec"))
    assert run.module == "mypkg.train" and run.script is None and (0, "backward") in passes


def test_script_raising_is_failed_with_traceback_and_passes_kept(tmp_path, capsys):
    script = write_script(tmp_path, "boom.py", """
        model(torch.randn(4, 8)).backward()
        raise ValueError("loss went to the moon")
    """)
    out = tmp_path / "b.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 1
    assert "ValueError: loss went to the moon" in err and "failed" in stdout
    run, passes = _passes(str(out))
    assert run.status == "failed" and run.exit_code == 1
    assert "ValueError: loss went to the moon" in run.traceback and "boom.py" in run.traceback
    assert "runpy" not in run.traceback
    assert passes[(0, "forward")][-1] == "codegen" and passes[(0, "backward")][-1] == "codegen"


@pytest.mark.parametrize("exit_call, code, status", [("sys.exit(0)", 0, "ok"), ("sys.exit(3)", 3, "failed"),
                                                     ("sys.exit('bad data')", 1, "failed")])
def test_sys_exit_codes_are_honoured(tmp_path, capsys, exit_call, code, status):
    script = write_script(tmp_path, "ex.py", f"import sys\n{exit_call}\n", with_model=False)
    out = tmp_path / "e.tvrec"
    assert run_cli(capsys, "run", "--no-view", "-o", out, script)[0] == code
    assert _passes(str(out))[0].status == status


def _assert_refused(capsys, tmp_path, argv, fragment):
    code, out, err = run_cli(capsys, "run", "--no-view", *argv)
    assert code == 2, (out, err)
    assert err.startswith("thundervis: ") and err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "ran.txt").exists()


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = write_script(tmp_path, "good.py", "open('ran.txt', 'w')\n", with_model=False)
    bad = write_script(tmp_path, "bad.py", "open('ran.txt', 'w')\ndef f(:\n", with_model=False)
    _assert_refused(capsys, tmp_path, ["nope.py"], "does not exist")
    _assert_refused(capsys, tmp_path, [bad], "syntax error at line 2")
    _assert_refused(capsys, tmp_path, ["-m", "no_such_module_xyz"], "cannot find module")
    _assert_refused(capsys, tmp_path, ["--executors", "warp", good], "unknown executor 'warp'")
    (tmp_path / "exists.tvrec").write_text("x")
    _assert_refused(capsys, tmp_path, ["-o", "exists.tvrec", good], "already exists")
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):  # root ignores permissions: use a path under a file
            target = tmp_path / "exists.tvrec" / "r.tvrec"
        else:
            target = tmp_path / "ro" / "r.tvrec"
        _assert_refused(capsys, tmp_path, ["-o", target, good], "cannot")
    finally:
        os.chmod(tmp_path / "ro", 0o700)
    assert not os.path.exists("thundervis-runs") or not os.listdir("thundervis-runs")


def test_default_output_is_named_after_the_script_and_unique(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path, "my_train.py", "x = 1\n", with_model=False)
    assert run_cli(capsys, "run", "--no-view", script)[0] == 0
    (made,) = os.listdir(tmp_path / "thundervis-runs")
    assert re.fullmatch(r"my_train-\d{8}-\d{6}(-\d+)?\.tvrec", made)
    first = default_output("my_train")
    open(first, "w").close()
    second = default_output("my_train")
    assert second != first and not os.path.exists(second)


SLEEPER = """
    import time
    model(torch.randn(4, 8)).backward()
    open(sys.argv[1], "w").write("ready")
    while True:
        time.sleep(0.05)
"""


def _start_sleeper(tmp_path):
    script = write_script(tmp_path, "sleeper.py", SLEEPER)
    ready = tmp_path / "ready"
    out = tmp_path / "s.tvrec"
    # faulthandler: a child that hangs is sent SIGABRT and prints every thread's stack (see below).
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, "-m", "thundervis", "run", "--no-view", "-o", str(out), script,
                             str(ready)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            # SIGINT back to its default in the child: a shell that backgrounds a job
                            # without job control (CI runners may) leaves it ignored, and inherited
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not ready.exists():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise AssertionError(f"the script did not get ready: {proc.communicate()}")
        time.sleep(0.05)
    return proc, str(out)


@pytest.mark.slow
def test_ctrl_c_marks_interrupted_and_closes_cleanly(tmp_path):
    proc, out = _start_sleeper(tmp_path)
    proc.send_signal(signal.SIGINT)
    try:
        # Generous: on a loaded 2-core machine the end-of-run work and torch's shutdown are slow.
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler dumps where it hangs
        stdout, stderr = proc.communicate(timeout=30)
        raise AssertionError(f"no exit within 180 s of SIGINT; the child's stacks:\n{stderr[-6000:]}")
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    run, passes = _passes(out)
    assert run.status == "interrupted" and run.exit_code == 130
    assert passes[(0, "backward")][-1] == "codegen"
    assert not os.path.exists(out + "-wal") or os.path.getsize(out + "-wal") == 0


@pytest.mark.slow
def test_sigkill_leaves_every_committed_pass_readable(tmp_path):
    proc, out = _start_sleeper(tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    run, passes = _passes(out)
    assert run.status == "killed" and run.ended_at is None
    assert run.last_event and "graph 0" in run.last_event
    assert passes[(0, "forward")][-1] == "codegen" and passes[(0, "backward")][-1] == "codegen"
    with open_recording(out) as rec:
        for c in rec.graph(0).chains:
            for p in c.passes:
                assert rec.pass_trace(0, c.kind, p.index).pass_name == p.name
        # The symbol rows of a run that never ended are derived from the passes' JSON.
        fw = rec.chain_symbols(0, "forward")
        assert {s.pass_index for s in fw} == {p.index for p in rec.graph(0).chain("forward").passes}
        assert any(s.seq_nr is not None for s in fw)


@pytest.mark.slow
def test_sigkill_leaves_a_self_contained_tvrec_that_says_killed(tmp_path, capsys):
    """Issue 11: kill -9 after the first graph compiled; the .tvrec copied alone (no -wal sidecar)
    opens, shows the graph and says killed."""
    import shutil
    proc, out = _start_sleeper(tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    alone = tmp_path / "sent" / "copy.tvrec"
    alone.parent.mkdir()
    shutil.copyfile(out, alone)  # the main file only, as a user attaches it to a bug report
    assert not os.path.exists(str(alone) + "-wal")
    run, passes = _passes(str(alone))
    assert run.status == "killed"
    assert passes[(0, "forward")][-1] == "codegen" and passes[(0, "backward")][-1] == "codegen"
    code, stdout, err = run_cli(capsys, "ls", alone)
    assert code == 0, err
    assert "status  killed" in stdout and "last recorded: graph 0" in stdout
    code, stdout, err = run_cli(capsys, "show", alone, "--plain")
    assert code == 0 and "inputs ▸" in stdout, err  # its signature folded, as the TUI folds it


def test_liveness_rules(monkeypatch):
    """killed: same host and the pid is gone or now another process; otherwise what the row says."""
    from thundervis.recording.liveness import host_name, process_token, run_status
    me, token = os.getpid(), process_token()
    assert run_status("running", me, host_name(), token) == "running"
    assert run_status("ok", 999999999, host_name(), None) == "ok"
    assert run_status("running", 999999999, host_name(), None) == "killed"
    assert run_status("running", 999999999, "another-host", None) == "running"
    assert run_status("running", me, None, None) == "running"  # schema 1: no host recorded
    if token is not None:  # the pid now names a process that started at another time
        assert run_status("running", me, host_name(), token + "0") == "killed"


def test_graph_break_reason_is_recorded(tmp_path, capsys):
    script = write_script(tmp_path, "gb.py", """
        import torch

        def f(x):
            y = torch.sin(x) * 2
            torch._dynamo.graph_break()
            return torch.cos(y) + 1
        torch.compile(f)(torch.randn(3))
    """, with_model=False)
    out = tmp_path / "gb.tvrec"
    assert run_cli(capsys, "run", "--no-view", "--executors", "torch", "-o", out, script)[0] == 0
    with open_recording(str(out)) as rec:
        g0, g1 = rec.graphs()
    assert g0.reason.startswith("graph break:") and "graph_break()" in g0.graph_break_reason
    assert g1.graph_break_reason is None and g0.compile_id != g1.compile_id


def test_a_dynamic_shape_script_compiles_each_shape_and_says_so(tmp_path, capsys):
    """``torch.compile(dynamic=True)`` under ``thundervis run``: every chain compiled (none eager),
    each shape a graph whose reason names the sizes, in the recording and in ``ls``."""
    script = write_script(tmp_path, "dyn.py", """
        import torch

        def f(x, w):
            return (torch.tanh(x @ w) * 2).sum()
        w = torch.randn(8, 4, requires_grad=True)
        g = torch.compile(f, dynamic=True)
        for n in (3, 5, 3):
            g(torch.randn(n, 8), w).backward()
    """, with_model=False)
    out = tmp_path / "dyn.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 0, err
    assert "0 of 4 chains ran eagerly" in stdout, stdout
    with open_recording(str(out)) as rec:
        graphs = rec.graphs()
        assert [g.reason.split(" (shape")[0] for g in graphs] == [
            "a dynamic-shape graph compiled for x 3×8, w 8×4", "a dynamic-shape graph compiled for x 5×8, w 8×4"]
        assert not rec.failures()
    code, listing, _ = run_cli(capsys, "ls", out)
    assert code == 0 and "a dynamic-shape graph compiled for x 5×8, w 8×4 (shape 2; at most 8, then eager)" in listing


def test_module_compile_of_torchs_own_modules_is_compiled(tmp_path, capsys):
    """``model.compile()`` on an ``nn.Sequential`` or a built-in layer captures nothing in torch
    alone (its ``_call_impl`` and ``forward`` are torch's own frames, pytorch#150915): under
    ``thundervis run`` it compiles as ``torch.compile(model)`` does, trains like eager, and a
    module of the user's own (its ``forward`` in the script) keeps torch's path."""
    script = write_script(tmp_path, "modc.py", """
        import copy
        import torch

        class Own(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                return torch.relu(self.fc(x))

        torch.manual_seed(0)
        seq = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
        conv, own = torch.nn.Conv1d(2, 2, 3), Own()
        eager = [copy.deepcopy(m) for m in (seq, conv, own)]
        for m in (seq, conv, own):
            m.compile()
        x, xc = torch.randn(4, 8), torch.randn(1, 2, 6)
        for m, e, inp in zip((seq, conv, own), eager, (x, xc, x)):
            m(inp).square().sum().backward()
            e(inp).square().sum().backward()
            for p, q in zip(m.parameters(), e.parameters()):
                assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6), (p.grad - q.grad).abs().max()
    """, with_model=False)
    out = tmp_path / "modc.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 0, err
    assert "0 of 6 chains ran eagerly" in stdout, stdout  # forward and backward of each module
    with open_recording(str(out)) as rec:
        assert len(rec.graphs()) == 3 and not rec.failures()


def test_torch_compile_options_run_overrides_are_shown(tmp_path, capsys):
    """``torch.compile(backend="inductor", mode="max-autotune")`` under ``thundervis run`` compiles
    through thundervis: the run's summary and ``ls`` say which options were not used (once each,
    however many times the script compiles); our own backend, by name or as a compiler, is not
    such an option."""
    script = write_script(tmp_path, "opts.py", """
        import torch
        for _ in range(2):
            f = torch.compile(lambda x: torch.sin(x) * 2, backend="inductor", mode="max-autotune")
            f(torch.randn(3))
        g = torch.compile(lambda x: torch.cos(x) + 1, backend="thundervis")
        g(torch.randn(3))
        from thundervis.compiler import ThundervisCompiler
        h = torch.compile(lambda x: torch.tan(x) - 1, backend=ThundervisCompiler())
        h(torch.randn(3))
        k = torch.compile(lambda x: torch.exp(x), backend=lambda gm, inputs: gm.forward)
        k(torch.randn(3))
    """, with_model=False)
    out = tmp_path / "opts.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 0, err
    line = ("torch.compile options not used: backend='inductor', mode='max-autotune', backend='<lambda>' "
            "(every graph compiles through thundervis; mode and options are Inductor's)")
    assert f"thundervis: {line}" in stdout.splitlines(), stdout
    code, listing, _ = run_cli(capsys, "ls", out, "--json")
    assert json.loads(listing)["compile_options_not_used"] == ["backend='inductor'", "mode='max-autotune'",
                                                              "backend='<lambda>'"]
    code, listing, _ = run_cli(capsys, "ls", out)
    assert line in listing.splitlines()


def test_steps_and_warmup_without_profile_say_they_are_ignored(tmp_path, capsys):
    script = write_script(tmp_path, "t.py", "x = 1\n", with_model=False)
    code, _, err = run_cli(capsys, "run", "--no-view", "-o", tmp_path / "a.tvrec", "--steps", "3",
                           "--warmup", "1", script)
    assert code == 0 and "--warmup and --steps only apply with --profile; ignored." in err
    code, _, err = run_cli(capsys, "run", "--no-view", "-o", tmp_path / "b.tvrec", "--profile", "--steps", "3", script)
    assert code == 0 and "ignored" not in err


def test_a_closed_pipe_ends_any_command_quietly(recorded, monkeypatch, capsys):
    """`thundervis diff ... | head`: BrokenPipeError is handled once in cli.main for all commands."""
    from thundervis.cli import main

    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self):
            return False

        def fileno(self):
            raise ValueError("no file descriptor")
    path, _ = recorded
    for argv in (["diff", path], ["ls", path], ["show", path]):
        monkeypatch.setattr(sys, "stdout", ClosedPipe())
        assert main([str(a) for a in argv]) == 141
        monkeypatch.undo()
    assert "Traceback" not in capsys.readouterr().err


def test_schema_1_recordings_are_read_as_they_are(tmp_path, capsys):
    """Schema 2 added run.host and run.process_start; a version 1 file (without them) still reads,
    and its status stays what the file says (no host: it cannot tell killed from running)."""
    import sqlite3

    import kernel_fixtures as kf
    path = kf.make_recording(str(tmp_path / "v2.tvrec"), [(0, "forward", kf.kernel_record(kf.region_trace()))])
    with sqlite3.connect(path) as c:
        c.execute("ALTER TABLE run DROP COLUMN host")
        c.execute("ALTER TABLE run DROP COLUMN process_start")
        c.execute("UPDATE run SET status='running', ended_at=NULL, pid=999999999")
        c.execute("PRAGMA user_version = 1")
    with open_recording(path) as rec:
        assert rec.schema_version == 1
        run = rec.run()
    assert run.status == "running" and run.host is None and run.last_event is None
    code, out, err = run_cli(capsys, "ls", path, "--json")
    assert code == 0 and json.loads(out)["schema"] == 1, err


def test_a_sigterm_while_a_failure_is_written_leaves_the_run_failed(tmp_path):
    """torchrun sends SIGTERM to every rank once one dies; a rank whose script has just failed on
    the dead peer gets it while the traceback is being written (seen in CI: the rank read "ok",
    exit 0). The script's end is the verdict: failed, exit 1, whatever arrives after it."""
    script = write_script(tmp_path, "fails.py", """
        raise RuntimeError("the peer is gone")
    """)
    out = str(tmp_path / "f.tvrec")
    driver = (
        "import os, signal, sys\n"
        "from thundervis import runner\n"
        "written = runner._user_traceback\n"
        "def late_sigterm():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # lands as the traceback is written\n"
        "    return written()\n"
        "runner._user_traceback = late_sigterm\n"
        f"r = runner.run_target(script={script!r}, module=None, args=[], out=runner.check_output({out!r}))\n"
        "print(r.status, r.exit_code)\n")
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["failed", "1"], done.stdout + done.stderr[-3000:]
    with open_recording(out) as rec:
        run = rec.run()
    assert run.status == "failed" and run.exit_code == 1 and "the peer is gone" in (run.traceback or "")
