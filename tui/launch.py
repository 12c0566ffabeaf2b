"""Running the TUI from the command line: open a recording or a group folder, run the app until
the user quits, close what was opened, and turn damage found while it ran into one sentence."""
from __future__ import annotations

import os
from typing import Optional

from .app import ThundervisApp
from .data import DataError, RecordingData


class _RefusingApp(ThundervisApp):
    """The app as ``run_app`` runs it: a recording found unreadable while it runs (an exception no
    view caught) ends it quietly; ``run_app`` then raises that one sentence (exit 2 at the CLI)
    instead of Textual's traceback screen and exit 0."""

    refused: Optional[str] = None

    def _handle_exception(self, error: Exception) -> None:
        from thundervis.recording import RecordingError
        cause = getattr(error, "error", error)  # a worker's failure wraps the exception
        if isinstance(cause, (RecordingError, DataError)):
            if self.refused is None:
                self.refused = str(cause)
            self.exit(return_code=2)
            return
        super()._handle_exception(error)


def run_app(data: RecordingData, poll_s: float = 1.0, group=None, rank: Optional[int] = None) -> None:
    """Run the TUI on an open recording (rank ``rank`` of ``group`` when given) until the user
    quits, then close it (with a group: every rank opened). Raises ``RecordingError`` (one sentence)
    when the recording turned out unreadable while the UI ran."""
    app = _RefusingApp(data, poll_s=poll_s, group=group, rank=rank)
    try:
        app.run()
    finally:
        (group if group is not None else data).close()
    if app.refused is not None:
        from thundervis.recording import RecordingError
        raise RecordingError(app.refused)


def view_recording(path: str, poll_s: float = 1.0, rank: Optional[int] = None) -> None:
    """Open the recording or group folder at ``path`` (a group on ``rank``, default its lowest)
    in the TUI, blocking until the user quits; raises ``tui.data.DataError`` (one sentence) when
    it is not a readable recording or group."""
    if os.path.isdir(path):
        from .group_data import open_group_data
        group = open_group_data(path)
        try:
            rank, data = group.start(rank)
        except DataError:
            group.close()
            raise
        run_app(data, poll_s, group=group, rank=rank)
        return
    from .data import open_data
    run_app(open_data(path), poll_s)
