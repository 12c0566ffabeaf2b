"""The options of the commands that read a recording: which recording (a file, or a rank of a
group folder: ``show``, ``dot``, ``ls``, ``numerics``), which pass (``show``, ``dot``), and which
kernel of one recording file (``asm``, ``repro``, ``rerun``). One owner for their names, defaults
and help; the defaults are the default view's (``present.default_view``)."""
from __future__ import annotations

from thundervis.errors import UserError


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


def add_pass_command(subparsers, name: str, help: str, verb: str):
    """Add and return the parser of the subcommand ``name`` that reads one pass of a recording:
    ``REC``, ``--rank`` (in a group folder: the rank to ``verb``, default the lowest) and the pass
    options (:func:`add_pass_arguments`)."""
    p = subparsers.add_parser(name, help=help)
    add_recording_arguments(p, f"in a group folder: the rank to {verb} (default: the lowest)")
    add_pass_arguments(p)
    return p


def add_recording_file_argument(p, made_with: str = "") -> None:
    """Add ``REC``, one ``.tvrec`` recording file, to ``p``; ``made_with``: the ``run`` flag it must
    have been recorded with (e.g. ``--profile``), or ''."""
    p.add_argument("recording", metavar="REC",
                   help="a .tvrec recording" + (f" made with run {made_with}" if made_with else ""))


def add_kernel_arguments(p, made_with: str = "", kernel_hint: str = "") -> None:
    """Add ``REC`` (:func:`add_recording_file_argument`) and ``KERNEL``, a kernel's name, to ``p``;
    ``kernel_hint`` ends the name's help."""
    add_recording_file_argument(p, made_with)
    p.add_argument("kernel", metavar="KERNEL", help="kernel name, e.g. fw_fusion_0" + kernel_hint)


def rank_of_a_recording(path: str) -> UserError:
    """Return the one error every reading command gives for ``--rank`` on a single recording."""
    return UserError(f"--rank picks a rank of a group folder; {path} is one recording, not a group folder.")


def selection(rec, graph=None, chain=None, pass_=None):
    """Return the ``present.selection.Selection`` the options ``--graph``/``--chain``/``--pass``
    name in the open recording ``rec`` (None: the default view's); UserError naming the valid
    choices."""
    from thundervis.present.errors import DataError
    from thundervis.present.selection import select
    try:
        return select(rec.graphs(), graph, chain, pass_, rec.path)
    except DataError as e:
        raise UserError(str(e)) from None


def pass_pair(rec, graph=None, chain=None, from_=None, to=None):
    """Return the ``present.selection.Selection`` of a pass diff (``--from``/``--to``: by default
    the last pass against the one before it); UserError naming the valid choices."""
    from thundervis.present.errors import DataError
    from thundervis.present.selection import select_pair
    try:
        return select_pair(rec.graphs(), graph, chain, from_, to, rec.path)
    except DataError as e:
        raise UserError(str(e)) from None
