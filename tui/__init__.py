"""The thundervis terminal UI (Textual): ``thundervis view REC`` and the end of ``thundervis run``.

Importing this package is cheap; Textual is imported when a recording is opened.
"""
from __future__ import annotations


def view_recording(path: str, poll_s: float = 1.0, rank=None) -> None:
    """Open the recording (or group folder, on ``rank``: default its lowest) at ``path`` in the
    terminal UI and return when the user quits; raises ``thundervis.tui.data.DataError`` (one
    sentence) when it is not a readable recording or group."""
    from .launch import view_recording as run_app
    run_app(path, poll_s=poll_s, rank=rank)
