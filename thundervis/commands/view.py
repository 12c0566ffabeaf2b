"""``thundervis view REC``: open a recording (finished, failed, killed or still being written) in
the terminal UI. The recording is validated before the UI starts (exit 2 with one sentence)."""
from __future__ import annotations

import sys

from thundervis.cli import UserError


def cmd_view(args) -> int:
    """Validate the recording, then run the TUI until the user quits."""
    from thundervis.tui.data import DataError, open_data  # the views load lazily (import contracts)
    try:
        data = open_data(args.recording)
    except DataError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        data.close()
        raise UserError("thundervis view needs a terminal; use thundervis ls or show to print a recording.")
    from thundervis.tui.app import run_app
    run_app(data, poll_s=args.poll)
    return 0


def register(subparsers) -> None:
    """Add the ``view`` subcommand."""
    p = subparsers.add_parser("view", help="browse a recording in the terminal UI")
    p.add_argument("recording", metavar="REC", help="a .tvrec recording (it may still be written by a run)")
    p.add_argument("--poll", type=float, default=1.0, metavar="S",
                   help="seconds between checks for new passes of a live run (default 1; 0: never)")
    p.set_defaults(func=cmd_view)
