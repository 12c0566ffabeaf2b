"""``thundervis diff --ranks GROUP [--json]``: are the ranks' traces identical, where do they
differ, which rank is slowest per kernel (no subcommand of its own; ``diff`` hands over)."""
from __future__ import annotations

import sys

from thundervis.errors import UserError
from thundervis.safe_text import json_text, visible


def cmd_diff_ranks(args) -> int:
    """Print the rank comparison of the group folder ``args.recordings[0]``; exit 0 when the ranks
    compiled identical traces, 1 when they differ (like ``diff``)."""
    from thundervis.diff.ranks import compare_ranks, render_text
    from thundervis.recording import RecordingError
    from thundervis.recording import open_group
    if len(args.recordings) != 1:
        raise UserError("--ranks compares the ranks of one group folder (thundervis diff --ranks GROUP).")
    if args.from_ is not None or args.to is not None or args.graph is not None or args.chain is not None:
        raise UserError("--graph, --chain, --from and --to select a pass diff of one recording, not --ranks.")
    try:
        comp = compare_ranks(open_group(args.recordings[0]))
    except RecordingError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    if args.json:
        sys.stdout.write(json_text(comp.as_json(), indent=1) + "\n")
    else:
        sys.stdout.write(visible(render_text(comp, None if args.full else args.context)))
    return 0 if comp.identical else 1
