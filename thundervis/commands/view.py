"""``thundervis view REC`` / ``thundervis view GROUP [--rank R]``: open a recording (finished,
failed, killed or still being written), or a group folder of rank recordings one rank at a time, in
the terminal UI. The recording or group is validated before the UI starts (exit 2 with one
sentence)."""
from __future__ import annotations

import os
import sys

from thundervis.cli import UserError


def _open_group(path: str, rank):
    """Return (group data, rank shown first, its recording data); UserError when unreadable."""
    from thundervis.tui.data import DataError
    from thundervis.tui.group_data import open_group_data
    try:
        group = open_group_data(path)
    except DataError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    try:
        rank, data = group.start(rank)
    except DataError as e:
        group.close()
        raise UserError(str(e).rstrip(".") + ".") from None
    return group, rank, data


def cmd_view(args) -> int:
    """Validate the recording or group, then run the TUI until the user quits."""
    from thundervis.tui.data import DataError, open_data  # the views load lazily (import contracts)
    group = None
    if os.path.isdir(args.recording):
        group, rank, data = _open_group(args.recording, args.rank)
    elif args.rank is not None:
        raise UserError(f"--rank picks a rank of a group folder; {args.recording} is not a folder.")
    else:
        try:
            data = open_data(args.recording)
        except DataError as e:
            raise UserError(str(e).rstrip(".") + ".") from None
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        (group if group is not None else data).close()
        raise UserError("thundervis view needs a terminal; use thundervis ls or show to print a recording.")
    from thundervis.tui.app import run_app
    if group is None:
        run_app(data, poll_s=args.poll)
    else:
        run_app(data, poll_s=args.poll, group=group, rank=rank)
    return 0


def register(subparsers) -> None:
    """Add the ``view`` subcommand."""
    p = subparsers.add_parser("view", help="browse a recording (or a group of rank recordings) in the terminal UI")
    p.add_argument("recording", metavar="REC",
                   help="a .tvrec recording (it may still be written by a run) or a .tvgroup folder")
    p.add_argument("--rank", type=int, metavar="R", help="with a group folder: the rank to show first (default the lowest)")
    p.add_argument("--poll", type=float, default=1.0, metavar="S",
                   help="seconds between checks for new passes of a live run (default 1; 0: never)")
    p.set_defaults(func=cmd_view)
