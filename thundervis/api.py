"""The one module that knows both the core and the views.

Core modules (the recording store, the tools, the CLI's commands) never import a view, not even
lazily; the views (``thundervis.tui``, ``thundervis.notebook_ext``) import the core. What opens a
view from the core side goes through the functions here, each importing its view explicitly when
called (so importing this module, or the CLI, loads neither Textual nor the widgets):

- :func:`show` and :func:`show_diff` (also :func:`diff`): the notebook widgets
  (``thundervis.show(obj)``, ``thundervis.show_diff(a, b)``, or ``import thundervis.api as tv``,
  ``tv.show(obj)``, ``tv.diff(a, b)``), and :func:`jit`;
- :func:`open_tui_data` and :func:`run_tui`: what ``thundervis view`` validates and runs.

The import contracts (pyproject.toml) allow core -> view edges from this module only.
"""
from __future__ import annotations

import os
from typing import Optional

from thundervis.errors import UserError


def show(obj, **options):
    """Return the Jupyter widget for ``obj``: a recording path, an open recording, a function or
    module compiled with ``thundervis.jit`` in this process, or a group folder (options as
    :func:`thundervis.notebook_ext.show`)."""
    from thundervis.notebook_ext import show as show_widget
    return show_widget(obj, **options)


def show_diff(a, b, **options):
    """Return the diff widget of ``a`` and ``b``: two passes ``(source, chain, pass)`` or two
    recordings (see :func:`thundervis.notebook_ext.diff`)."""
    from thundervis.notebook_ext import diff as diff_widget
    return diff_widget(a, b, **options)


diff = show_diff


def jit(fn_or_module, **options):
    """Return ``fn_or_module`` compiled through the thundervis backend (see
    :func:`thundervis.session.jit`)."""
    from thundervis.session import jit as session_jit
    return session_jit(fn_or_module, **options)


def _sentence(e: Exception) -> str:
    return str(e).rstrip(".") + "."


def open_tui_data(path: str, rank: Optional[int] = None, group: bool = False):
    """Validate what ``thundervis view`` opens and return (the TUI's data, the group data or None,
    the rank shown first or None); :class:`~thundervis.errors.UserError` (one sentence) when the
    recording or group cannot be read."""
    from thundervis.recording import RecordingError
    from thundervis.tui.data import DataError, open_data
    if group:
        from thundervis.tui.group_data import open_group_data
        try:
            g = open_group_data(path)
        except (DataError, RecordingError) as e:
            raise UserError(_sentence(e)) from None
        try:
            rank, data = g.start(rank)
        except (DataError, RecordingError) as e:
            g.close()
            raise UserError(_sentence(e)) from None
        return data, g, rank
    try:
        data = open_data(path)
    except (DataError, RecordingError) as e:
        raise UserError(_sentence(e)) from None
    try:
        data.overview()  # what the first screen reads: a damaged value is refused before the UI starts
    except (DataError, RecordingError) as e:
        data.close()
        raise UserError(_sentence(e)) from None
    return data, None, None


def run_tui(data, poll_s: float, group=None, rank: Optional[int] = None) -> int:
    """Run the terminal UI on ``data`` (from :func:`open_tui_data`) until the user quits and close
    it; return 0. A recording found unreadable while the UI runs ends the UI and raises
    :class:`~thundervis.recording.RecordingError` (one sentence, exit 2 at the CLI) instead of
    Textual's traceback screen (``thundervis.tui.launch.run_app``)."""
    from thundervis.tui.launch import run_app
    if group is None:
        run_app(data, poll_s=poll_s)
    else:
        run_app(data, poll_s=poll_s, group=group, rank=rank)
    return 0


def view_recording(path: str, poll_s: float = 1.0) -> int:
    """Open the recording or group folder at ``path`` in the terminal UI (what ``thundervis run``
    ends in on a terminal) and return 0 once the user quits; :class:`~thundervis.errors.UserError`
    (one sentence) when it cannot be read."""
    data, group, rank = open_tui_data(path, group=os.path.isdir(path))
    return run_tui(data, poll_s, group=group, rank=rank)
