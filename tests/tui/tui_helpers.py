"""Fixtures for the TUI tests: small synthetic recordings written through the real writer (fixed
durations, so screens are the same on every run), and helpers to drive the app."""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("textual")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from _synthetic_group import write_group  # noqa: E402
from _synthetic_recording import write_recording  # noqa: E402


@pytest.fixture(scope="session")
def small_rec(tmp_path_factory) -> str:
    """A finished run: graph 0 with forward (40 ops) and backward chains, 12 passes each."""
    return write_recording(str(tmp_path_factory.mktemp("tui") / "small.tvrec"), n_symbols=40)


@pytest.fixture(scope="session")
def nine_pass_rec(tmp_path_factory) -> str:
    """A finished run whose chains have the 9 passes of a compiled chain (acquire ... codegen)."""
    names = ("acquire", "decompose", "cse", "simplify", "dce", "claim", "fuse", "liveness", "codegen")
    return write_recording(str(tmp_path_factory.mktemp("tui") / "nine.tvrec"), n_symbols=40, passes=names)


@pytest.fixture(scope="session")
def failed_rec(tmp_path_factory) -> str:
    """A run whose script raised after compiling."""
    tb = ('Traceback (most recent call last):\n  File "synthetic_model.py", line 30, in <module>\n'
          '    loss = step()\nZeroDivisionError: division by zero\n')
    return write_recording(str(tmp_path_factory.mktemp("tui") / "failed.tvrec"), n_symbols=20,
                           backward=False, status="failed", traceback_text=tb)


@pytest.fixture(scope="session")
def identical_group(tmp_path_factory) -> str:
    """A packed group of 2 ranks that compiled identical traces, not profiled."""
    return write_group(str(tmp_path_factory.mktemp("group")), variants=(0, 0))


@pytest.fixture(scope="session")
def variant_group(tmp_path_factory) -> str:
    """A packed, profiled group of 3 ranks: ranks 0 and 2 compiled one set of traces, rank 1 another
    (4 more ops in its forward chain); kernel times grow with the rank."""
    return write_group(str(tmp_path_factory.mktemp("group")), variants=(0, 1, 0), profiled=True)


@pytest.fixture(scope="session")
def failed_group(tmp_path_factory) -> str:
    """A group of 2 ranks where rank 1 failed (torchrun then stops the job)."""
    return write_group(str(tmp_path_factory.mktemp("group")), variants=(0, 0), statuses={1: "failed"})


def open_group_app(path: str, rank=None, poll_s: float = 0):
    """Return a ThundervisApp on the group folder at ``path``, showing ``rank`` (default the lowest)."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.group_data import open_group_data
    group = open_group_data(path)
    rank, data = group.start(rank)
    return ThundervisApp(data, poll_s=poll_s, group=group, rank=rank)


async def wait_for(pilot, ready, timeout: float = 20.0) -> None:
    """Wait until ``ready()`` is true (workers done), or fail."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await pilot.pause(0.02)
        if ready():
            await pilot.pause(0.02)
            return
    raise AssertionError("the screen did not load")


def open_app(path: str, poll_s: float = 0):
    """Return a ThundervisApp on the recording at ``path``."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.data import open_data
    return ThundervisApp(open_data(path), poll_s=poll_s)


async def settle(app, pilot, timeout: float = 20.0) -> None:
    """Wait until the app shows its current view and its workers are done."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await pilot.pause(0.02)
        if app.loaded and not any(w.is_running for w in app.workers
                                  if w.group in ("view", "details")):
            await pilot.pause(0.02)
            return
    raise AssertionError("the view did not load")


async def details_for(app, pilot, timeout: float = 20.0) -> str:
    """Wait for the details pane to show the selected symbol; return its text."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await pilot.pause(0.05)
        text = str(app.query_one("#detailtext").render())
        if app.state.selected_uid and app.state.selected_uid in text and "lineage …" not in text:
            return text
    raise AssertionError("the details did not load")


def screen_text(app) -> str:
    """Return the text of everything on the app's screen (widgets' rendered text)."""
    from textual.widgets import Static
    parts = []
    for w in app.screen.query(Static):
        parts.append(str(w.render()))
    return "\n".join(parts)


def _comm_trace(chain: str, prefix: str, claimed: bool):
    """A small trace that talks to other ranks: a mul, an all_reduce of its result and the wait
    on it, then an add (claimed: the executors and notes the claim pass gives them)."""
    from thundervis.compiler.collectives import CLAIM_NOTE
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace

    def t(name):
        return TensorProxy(name, (8, 4), "float32", "cpu", (4, 1))
    x, t0, t1, t2, t3 = t("x"), t("t0"), t("t1"), t("t2"), t("t3")
    src = SourceInfo(file="ddp_model.py", line=12, code="loss = model(x)", module="net", function="forward")
    comm = dict(executor="torch", note=CLAIM_NOTE) if claimed else {}
    syms = (BoundSymbol("aten.mul.Tensor", (x, 2.0), {}, t0, f"{prefix}0", source=src, seq_nr=0,
                        executor="torch" if claimed else None),
            BoundSymbol("_c10d_functional.all_reduce.default", (t0, "sum", "0"), {}, t1, f"{prefix}1",
                        source=src, seq_nr=1, **comm),
            BoundSymbol("_c10d_functional.wait_tensor.default", (t1,), {}, t2, f"{prefix}2", source=src,
                        seq_nr=2, **comm),
            BoundSymbol("aten.add.Tensor", (t2, x), {}, t3, f"{prefix}3", source=src, seq_nr=3,
                        executor="torch" if claimed else None))
    return Trace(name=chain, inputs=(x,), symbols=syms, outputs=(t3,), chain=chain, next_uid=4, next_name=4)


def _collective(seq: int, op: str, after, before, step: int, issuer: str, source=None) -> dict:
    """A ``collective`` event as the watcher records it (thundervis/collective_watch.py)."""
    return {"seq": seq, "op": op, "c10d_op": {"all_reduce": "allreduce_", "barrier": "barrier"}[op],
            "group_size": 2, "group": "0", "backend": "gloo", "inputs": [[[256], "float32"]],
            "outputs": [[[256], "float32"]], "bytes": 1024, "async": op != "barrier", "duration_ms": 0.25,
            "step": step, "after": after, "before": before, "issuer": issuer, "source": source}


@pytest.fixture(scope="session")
def comm_rec(tmp_path_factory) -> str:
    """A finished DDP-like run: graph 0's forward and backward traces hold an all_reduce and its
    wait; between the graphs DDP's reducer ran 2 all_reduces after the backward (before the next
    forward) and the script a barrier at the end; the summary counts 5 between graphs."""
    from thundervis.recording import RecordingObserver
    path = str(tmp_path_factory.mktemp("tui") / "comm.tvrec")
    obs = RecordingObserver(path)
    try:
        obs.start_run(script="ddp_model.py", module=None, argv=["ddp_model.py"], cwd="/work",
                      executors=["torch"])
        obs.graph_started(0, {"n_inputs": 1, "n_nodes": 4, "reason": "first call"})
        for chain, prefix in (("forward", "f"), ("backward", "b")):
            for index, (name, claimed) in enumerate((("acquire", False), ("claim", True))):
                trace = _comm_trace(chain, prefix, claimed).replace(pass_name=name)
                obs.pass_done(0, chain, index, name, trace, 0.001, True)
        obs.graph_finished(0, 0.5)
        fw1, bw1 = {"graph": 0, "chain": "forward", "call": 2}, {"graph": 0, "chain": "backward", "call": 1}
        reducer = "torch/autograd/graph.py:829 _engine_run_backward"
        obs.note("collective", _collective(0, "all_reduce", bw1, fw1, 1, reducer))
        obs.note("collective", _collective(1, "all_reduce", bw1, fw1, 1, reducer))
        obs.note("collective", _collective(2, "barrier", {"graph": 0, "chain": "backward", "call": 2}, None, 2,
                                           "script", "ddp_model.py:40"))
        obs.note("collective_summary", {
            "between_graphs": 5, "by_op": [{"op": "all_reduce", "count": 4, "bytes": 4096},
                                           {"op": "barrier", "count": 1, "bytes": 0}],
            "places": [{"after": {"graph": 0, "chain": "backward"}, "before": {"graph": 0, "chain": "forward"},
                        "op": "all_reduce", "count": 4, "bytes": 4096},
                       {"after": {"graph": 0, "chain": "backward"}, "before": None, "op": "barrier",
                        "count": 1, "bytes": 0}],
            "in_graphs": []})
        obs.finish_run("ok", 0, None)
    finally:
        obs.close()
    return path
