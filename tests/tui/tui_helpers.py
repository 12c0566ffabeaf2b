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
        if app.selected_uid and app.selected_uid in text and "lineage …" not in text:
            return text
    raise AssertionError("the details did not load")


def screen_text(app) -> str:
    """Return the text of everything on the app's screen (widgets' rendered text)."""
    from textual.widgets import Static
    parts = []
    for w in app.screen.query(Static):
        parts.append(str(w.render()))
    return "\n".join(parts)
