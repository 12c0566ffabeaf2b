"""Opening a recorded source line in the user's editor (``e``), suspending the TUI meanwhile."""
from __future__ import annotations

import os
import shlex
import subprocess
from typing import Optional

from thundervis.safe_text import visible_line


def open_in_editor(app, src: Optional[tuple[str, int]]) -> None:
    """Run ``$VISUAL``/``$EDITOR`` (default vi) on ``+LINE FILE`` for ``src`` (file, line) with
    ``app`` suspended; a missing file, no source or no editor is a notification, never an error."""
    if src is None:
        app.notify("the selected line has no source file", severity="warning")
        return
    file, line = src
    if not os.path.isfile(file):
        app.notify(f"{visible_line(file)} is not on this machine", severity="warning")
        return
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    # The path comes from the recording: absolute, so it can never read as an editor option.
    cmd = shlex.split(editor) + [f"+{int(line)}", os.path.abspath(file)]
    try:
        with app.suspend():
            subprocess.run(cmd, check=False)
    except Exception as e:  # no terminal to give away (headless), or no such editor
        app.notify(f"could not run {visible_line(editor)} ({type(e).__name__}: {visible_line(str(e))})", severity="error")
