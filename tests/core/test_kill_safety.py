"""No window in which a run can be lost (issue 22 F6).

``kill -9`` at random points of ``thundervis run examples/train_gpt.py``: the ``.tvrec`` copied
alone (no ``-wal`` beside it, as a user attaches it to a bug report) always opens and says
``killed``. Ctrl-C at any point after the recording exists says ``interrupted`` and leaves a
finished, rollback-journal file. The recording appears whole (schema and run row, renamed into
place), so a kill can never leave a half-created file under the output name.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from thundervis.recording import open_recording

from core_helpers import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "examples", "train_gpt.py")


def _start(out: str) -> subprocess.Popen:
    """Start ``thundervis run examples/train_gpt.py`` for a million steps (it outlives every kill, even at eager speed)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.Popen([sys.executable, "-m", "thundervis", "run", "--no-view", "-o", out, GPT,
                             "--steps", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=ctrl_c_reaches_it)


def ctrl_c_reaches_it() -> None:
    """In the child before exec: SIGINT back to its default. A shell that starts a job in the
    background without job control (``cmd &`` in a script, as CI runners may) sets SIGINT to ignored,
    the child inherits that, and Python then installs no KeyboardInterrupt handler: a Ctrl-C test
    would wait for a run that never hears it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(path: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise AssertionError(f"no recording appeared: {proc.communicate()[1][-3000:]}")
        time.sleep(0.01)


def _run_script(tmp_path, text: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run the script ``text`` under ``thundervis run --no-view`` in a subprocess; return the
    finished process and the recording's path."""
    path = tmp_path / "s.py"
    path.write_text(text)
    out = str(tmp_path / "s.tvrec")
    return subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "-o", out, str(path)],
                          capture_output=True, text=True, timeout=240, preexec_fn=ctrl_c_reaches_it), out


def _opens_alone_and_says(path: str, folder, status: str, capsys) -> int:
    """Copy ``path`` alone, open it, check its status; return how many passes it holds."""
    alone = folder / "sent.tvrec"
    shutil.copyfile(path, alone)
    assert not os.path.exists(str(alone) + "-wal")
    with open_recording(str(alone)) as rec:
        run = rec.run()
        assert run.status == status, (status, run)
        assert run.script and run.script.endswith("train_gpt.py")
        n = sum(len(c.passes) for g in rec.graphs() for c in g.chains)
    code, out, err = run_cli(capsys, "ls", alone)
    assert code == 0, err
    assert f"status  {status}" in out, out
    return n


@pytest.mark.slow
def test_kill_9_at_random_points_always_leaves_a_tvrec_that_opens_alone_and_says_killed(tmp_path, capsys):
    rng = random.Random(22)
    # 20 points spread over the first compile (forward and backward) and the first steps; bounded.
    delays = sorted(rng.uniform(0.0, 14.0) for _ in range(20))
    passes_seen = []
    for n, delay in enumerate(delays):
        folder = tmp_path / f"k{n}"
        folder.mkdir()
        out = str(folder / "gpt.tvrec")
        proc = _start(out)
        try:
            _wait_for(out, proc)
            time.sleep(delay)
            assert proc.poll() is None, f"the run ended before the kill: {proc.communicate()[1][-2000:]}"
        finally:
            proc.kill()
            proc.communicate(timeout=60)
        passes_seen.append(_opens_alone_and_says(out, folder, "killed", capsys))
        assert [f for f in os.listdir(folder) if f.endswith(".creating")] == []
    # The points really spread over the compile: some kills before any pass, some after many.
    assert max(passes_seen) > 10, passes_seen


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.3, 2.0])
def test_ctrl_c_early_says_interrupted_with_a_summary(tmp_path, capsys, delay):
    out = str(tmp_path / "gpt.tvrec")
    proc = _start(out)
    try:
        _wait_for(out, proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        stdout, err = proc.communicate(timeout=240)
    except BaseException:
        proc.kill()
        raise
    assert proc.returncode == 130, err[-3000:]
    # (AOTAutograd traces the joint graph under anomaly mode: torch itself may print "Traceback of
    # forward call" when the interrupt lands there; no traceback of ours.)
    assert "Traceback (most recent call last)" not in err, err[-3000:]
    assert "the script interrupted (exit 130)" in stdout, stdout
    with open_recording(out) as rec:
        assert rec.run().status == "interrupted"
    assert not os.path.exists(out + "-wal") or os.path.getsize(out + "-wal") == 0
    with open(out, "rb") as f:
        header = f.read(20)
    assert header[18:20] == b"\x01\x01", "the finished recording is left in WAL mode"
    _opens_alone_and_says(out, tmp_path, "interrupted", capsys)


DROPPED_CTRL_C = """\
import time
import weakref


class Tensorish:
    pass


def freed(_):
    # What a Ctrl-C landing inside a weakref callback (torch frees tensors through them) raises;
    # Python drops it ("Exception ignored in ...") and the loop below would run to its end.
    raise KeyboardInterrupt


t = Tensorish()
ref = weakref.ref(t, freed)
del t
for step in range(400):
    time.sleep(0.01)
print("trained on after the Ctrl-C")
"""

GUARD_CTRL_C = """\
import _thread
import threading
import time

# A TorchDynamo guard function as Dynamo generates it: torch takes an exception raised in it as
# "guard failed" and clears it, so a Ctrl-C raised there would be lost.
namespace = {}
exec(compile("def guard(L):\\n    L['sleep'](0.5)\\n    return True\\n", "<string>", "exec"), namespace)
threading.Timer(0.1, _thread.interrupt_main).start()  # Ctrl-C while the guard runs
print("guard passed:", namespace["guard"]({"sleep": time.sleep}), flush=True)
for step in range(400):
    time.sleep(0.01)
print("trained on after the Ctrl-C")
"""

DISPATCH_CTRL_C = """\
import os
import signal
import threading
import time
import traceback

import torch

# An op that takes about half a second on this CPU however fast it is (sized from a small one), so
# that the Ctrl-C arrives while it runs.
probe = torch.randn(512, 512)
took = []
for _ in range(3):
    t0 = time.perf_counter()
    torch.mm(probe, probe)
    took.append(time.perf_counter() - t0)
n = min(8000, int(512 * (0.5 / max(min(took), 1e-6)) ** (1 / 3)))
a = torch.randn(n, n)
state = {}


def ctrl_c():
    state["sent"] = time.perf_counter()
    os.kill(os.getpid(), signal.SIGINT)


threading.Timer(0.1, ctrl_c).start()
try:
    # Python handles the Ctrl-C when the op returns, in OpOverload.__call__ (torch/_ops.py): Python
    # that torch's dispatcher also runs while an op executes, where a KeyboardInterrupt can reach
    # C++ that cannot pass it on. It is sent again, and lands in the wait below, which only a real
    # signal ends before its minute.
    torch.ops.aten.mm.default(a, a)
    state["returned"] = time.perf_counter()
    threading.Event().wait(60)
    print("trained on after the Ctrl-C")
except KeyboardInterrupt as e:
    print("sent while the op ran:", state["sent"] < state.get("returned", float("inf")))
    print("waited %.1f s" % (time.perf_counter() - state.get("returned", time.perf_counter())))
    print("raised in", " < ".join(os.path.basename(f.filename) for f in traceback.extract_tb(e.__traceback__)),
          flush=True)
    raise
"""

CAUGHT_CTRL_C = """\
try:
    raise KeyboardInterrupt
except KeyboardInterrupt:
    pass
print("the script handled its own Ctrl-C")
"""


@pytest.mark.parametrize("script, code, status", [(DROPPED_CTRL_C, 130, "interrupted"),
                                                  (GUARD_CTRL_C, 130, "interrupted"), (CAUGHT_CTRL_C, 0, "ok")],
                         ids=["weakref-callback", "dynamo-guard", "caught-by-the-script"])
def test_a_ctrl_c_that_would_be_dropped_still_stops_the_run_and_one_the_script_catches_does_not(
        tmp_path, script, code, status):
    """A Ctrl-C whose KeyboardInterrupt would be dropped (raised in a weakref callback, as when it
    lands while torch frees a tensor; or in a TorchDynamo guard, which torch reads as a failed
    guard: CI once saw a run train on for minutes after a Ctrl-C) still stops the run as
    ``interrupted`` (exit 130), the guard itself left to finish; one the script catches itself is
    its business: the run goes on."""
    proc, out = _run_script(tmp_path, script)
    assert proc.returncode == code, proc.stderr[-3000:]
    assert "trained on" not in proc.stdout and "Exception ignored" not in proc.stderr, (proc.stdout, proc.stderr)
    assert ("guard passed: True" in proc.stdout) == (script is GUARD_CTRL_C), proc.stdout
    with open_recording(out) as rec:
        assert rec.run().status == status


def test_a_ctrl_c_is_not_raised_in_the_python_torch_dispatch_runs_and_wakes_a_wait(tmp_path):
    """A Ctrl-C that Python would raise in torch's dispatch-side Python (here OpOverload.__call__
    after its op returns; during Dynamo's fake-tensor tracing such a KeyboardInterrupt aborted the
    process: "terminate called after throwing an instance of 'pybind11::error_already_set'") is
    sent again and raised outside it; sent again as a real signal, it ends the wait the script is
    blocked in by then at once, not when the wait's minute is up. The run ends ``interrupted``."""
    proc, out = _run_script(tmp_path, DISPATCH_CTRL_C)
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "sent while the op ran: True" in lines, proc.stdout  # else this test checks nothing
    raised_in = next(ln for ln in lines if ln.startswith("raised in "))
    assert raised_in.startswith("raised in s.py < threading.py") and "_ops.py" not in raised_in, raised_in
    waited = float(next(ln for ln in lines if ln.startswith("waited ")).split()[1])
    assert waited < 10, proc.stdout
    with open_recording(out) as rec:
        assert rec.run().status == "interrupted"


def test_where_a_ctrl_c_is_unsafe_to_raise_and_how_long_it_is_held_off(monkeypatch):
    """:func:`interrupts.unsafe_place`: a Dynamo guard (torch would clear the exception) and the
    Python torch's dispatcher runs (it could abort) are told apart from everywhere else. The
    handler sends a Ctrl-C landing in a guard again as long as it takes, one on the dispatch side
    for at most ``DEFER_LIMIT_S`` (then it raises where it lands, as Python would); anywhere else
    it raises at once, and the next Ctrl-C starts a new wait."""
    import types

    import torch

    from thundervis import interrupts
    folder = os.path.dirname(torch.__file__)

    def frame(path, below=None, name="f"):
        return types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=path, co_name=name), f_back=below)

    script = frame("/x/train.py")
    dispatch = frame(os.path.join(folder, "_library", "simple_registry.py"), script)
    guard = frame("<string>", frame(os.path.join(folder, "_dynamo", "eval_frame.py"), script), name="guard")
    place = interrupts.unsafe_place
    assert (place(dispatch), place(script), place(guard)) == (interrupts.DISPATCH, None, interrupts.GUARD)
    # Called by the dispatch side (pytree under a __torch_dispatch__ rule): inside it too.
    assert place(frame("/lib/contextlib.py", frame(os.path.join(folder, "utils", "_pytree.py"),
                                                   frame(os.path.join(folder, "_ops.py"), script)))) == interrupts.DISPATCH
    assert place(frame(os.path.join(folder, "nn", "modules", "module.py"))) is None
    assert place(frame(os.path.join("/elsewhere", "_ops.py"))) is None
    # A guard run under the dispatcher's Python is a guard (torch clears what it raises).
    assert place(frame("<string>", dispatch, name="guard")) == interrupts.GUARD
    # Dynamo's frame-hook callback: only where the signal lands (compiled calls run under it).
    hook = os.path.join(folder, "_dynamo", "eval_frame.py")
    assert place(frame(hook, script)) == interrupts.DISPATCH
    assert place(frame("/x/model.py", frame(hook, script))) is None
    # How deep each is looked for: a guard up to 11 frames below, the dispatcher up to 47.
    ops = os.path.join(folder, "_ops.py")
    assert place(_chain(frame, 11, frame("<string>", name="guard"))) == interrupts.GUARD
    assert place(_chain(frame, 12, frame("<string>", name="guard"))) is None
    assert place(_chain(frame, 47, frame(ops))) == interrupts.DISPATCH
    assert place(_chain(frame, 48, frame(ops))) is None

    clock = [100.0]
    monkeypatch.setattr(interrupts, "_now", lambda: clock[0])
    handler = interrupts.RedeliveredInterrupts()
    sent = []
    monkeypatch.setattr(handler, "_send_again", lambda: sent.append(clock[0]))
    try:
        handler._on_sigint(signal.SIGINT, dispatch)
        clock[0] += interrupts.DEFER_LIMIT_S / 2
        handler._on_sigint(signal.SIGINT, dispatch)
        assert sent == [100.0, 100.0 + interrupts.DEFER_LIMIT_S / 2]
        clock[0] += interrupts.DEFER_LIMIT_S
        with pytest.raises(KeyboardInterrupt):
            handler._on_sigint(signal.SIGINT, dispatch)
        handler._on_sigint(signal.SIGINT, dispatch)  # a new Ctrl-C: held off again
        assert len(sent) == 3
        clock[0] += 10 * interrupts.DEFER_LIMIT_S
        handler._on_sigint(signal.SIGINT, guard)  # a guard: no limit
        assert len(sent) == 4
        with pytest.raises(KeyboardInterrupt):
            handler._on_sigint(signal.SIGINT, script)
    finally:
        signal.signal(signal.SIGINT, handler.close(signal.getsignal(signal.SIGINT)))


def _chain(frame, n: int, bottom):
    """Return the top of ``n`` frames of the script's own code above ``bottom``."""
    top = bottom
    for _ in range(n):
        top = frame("/x/model.py", top)
    return top


COMPILE_CTRL_C = """\
import atexit
import os
import signal
import threading
import time

import torch

from thundervis.compiler.executors.cpu_path import COMPILE_THREAD, compile_in_fresh_thread


def slow(x):
    time.sleep(1.5)  # while make_fx traces it on the compile thread
    return x * 2


# Run by Python's exit after it joined its non-daemon threads, before it ends the daemon ones (a
# thread that has just finished is given a moment to be gone).
atexit.register(lambda: print("compiling at exit:", [t.name for t in threading.enumerate() if t.name == COMPILE_THREAD
                                                     and (t.join(0.2) or t.is_alive())], flush=True))
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # Ctrl-C during the compile
compile_in_fresh_thread(slow, (torch.ones(4),))
print("compiled before the Ctrl-C")
"""


def test_a_ctrl_c_during_a_cpu_region_compile_lets_the_compile_end_before_python_exits(tmp_path):
    """A Ctrl-C while a CPU region compiles with Inductor ends the wait for the compile thread,
    not the compile: the run ends ``interrupted`` and then waits for that thread, saying so, so
    Python's exit does not end it inside C++ (which aborted the process, exit -6)."""
    proc, out = _run_script(tmp_path, COMPILE_CTRL_C)
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "compiled before" not in proc.stdout and "compiling at exit: []" in proc.stdout, proc.stdout
    assert "waiting for the CPU region compile the interrupt left running" in proc.stderr, proc.stderr[-3000:]
    with open_recording(out) as rec:
        assert rec.run().status == "interrupted"


def test_the_recording_appears_whole(tmp_path):
    """Created under a hidden name and renamed: the .tvrec alone is a recording from its first
    byte, with a run row that names this process (so a kill reads as killed)."""
    from thundervis.recording import RecordingObserver
    path = str(tmp_path / "r.tvrec")
    rec = RecordingObserver(path)
    try:
        alone = tmp_path / "alone.tvrec"
        shutil.copyfile(path, alone)
        with open_recording(str(alone)) as r:
            assert r.run().status == "running"  # this process is alive
        rec.start_run(script="/x/train.py", module=None, argv=["train.py"], cwd="/x")
        shutil.copyfile(path, alone)
        with open_recording(str(alone)) as r:
            assert r.run().script == "/x/train.py"
    finally:
        rec.close()
    assert os.listdir(tmp_path) == ["r.tvrec", "alone.tvrec"] or sorted(os.listdir(tmp_path)) == ["alone.tvrec", "r.tvrec"]
