"""The options of the commands that read one pass of a recording (``show``, ``dot``, ``ls``,
``numerics``): which recording (a file, or a rank of a group folder) and which pass. One owner for
their names, defaults and help; the defaults are the default view's (``present.default_view``)."""
from __future__ import annotations


def add_recording_arguments(p, rank_help: str = "in a group folder: this rank's recording") -> None:
    """Add ``REC`` (a recording or a group folder) and ``--rank`` to the parser ``p``."""
    p.add_argument("recording", metavar="REC", help="a .tvrec recording, or a group folder (one recording per rank)")
    p.add_argument("--rank", type=int, default=None, help=rank_help)


def add_pass_arguments(p) -> None:
    """Add ``--graph``/``-g``, ``--chain``/``-c`` and ``--pass``/``-p`` (the pass to read) to ``p``."""
    p.add_argument("--graph", "-g", type=int, default=None, help="graph id (default: the first with a forward chain)")
    p.add_argument("--chain", "-c", default=None,
                   help="dynamo, joint, forward, backward or inference (default: forward)")
    p.add_argument("--pass", "-p", dest="pass_", default=None, metavar="P",
                   help="pass index or name (default: the last pass)")
