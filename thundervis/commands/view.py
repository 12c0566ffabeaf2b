"""``thundervis view REC`` / ``thundervis view GROUP [--rank R]``: open a recording (finished,
failed, killed or still being written), or a group folder of rank recordings one rank at a time, in
the terminal UI. The recording or group is validated before the UI starts (exit 2 with one
sentence)."""
from __future__ import annotations

import os
import sys

from thundervis.errors import UserError
from thundervis.commands.read_options import rank_of_a_recording


def cmd_view(args) -> int:
    """Validate the recording or group, then run the TUI until the user quits (exit 2 with one
    sentence when the recording turns out unreadable, before or while the UI runs)."""
    from thundervis import api  # the one module that opens views
    if os.path.isdir(args.recording):
        data, group, rank = api.open_tui_data(args.recording, args.rank, group=True)
    elif args.rank is not None:
        raise rank_of_a_recording(args.recording)
    else:
        data, group, rank = api.open_tui_data(args.recording)
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        (group if group is not None else data).close()
        raise UserError("thundervis view needs a terminal; use thundervis ls or show to print a recording.")
    return api.run_tui(data, args.poll, group=group, rank=rank)


def register(subparsers) -> None:
    """Add the ``view`` subcommand."""
    p = subparsers.add_parser("view", help="browse a recording (or a group of rank recordings) in the terminal UI")
    p.add_argument("recording", metavar="REC",
                   help="a .tvrec recording (it may still be written by a run) or a .tvgroup folder")
    p.add_argument("--rank", type=int, metavar="R", help="with a group folder: the rank to show first (default the lowest)")
    p.add_argument("--poll", type=float, default=1.0, metavar="S",
                   help="seconds between checks for new passes of a live run (default 1; 0: never)")
    p.set_defaults(func=cmd_view)
