"""The app's one key table: each entry gives the key binding (and whether the footer shows it)
and the command palette's entry (ctrl+p); the group actions only when the app shows a group."""
from __future__ import annotations

from typing import NamedTuple

from textual.binding import Binding


class Key(NamedTuple):
    """One action of the app: ``key`` runs ``action(*args)``; ``label`` in the footer when
    ``show``; ``title`` and ``help`` in the palette (no ``title``: not in the palette)."""

    key: str
    action: str
    label: str
    show: bool = True
    title: str = ""
    help: str = ""
    args: tuple = ()
    group: bool = False  # only on a group of ranks


KEYS = [
    Key("q", "quit", "Quit"),
    # the two group keys first, so 80 columns show them
    Key("ctrl+r", "pick_rank", "Rank", True, "Switch rank",
        "Pick a rank of the group: status, variant, host, times (ctrl+r)", group=True),
    Key("equals_sign", "compare_ranks", "Compare", True, "Compare ranks",
        "Identical traces? Variants, differing passes, kernel skew (=)", group=True),
    Key("n", "step", "Next", True, "Next pass", "Step to the next pass (n)", (1,)),
    Key("p", "step", "Prev", True, "Previous pass", "Step to the previous pass (p)", (-1,)),
    Key("d", "toggle", "Diff", True, "Toggle diff", "Diff against the previous pass (d)", ("diff",)),
    Key("D", "diff_against", "Diff vs…", False, "Diff against pass", "Diff against a chosen pass (D)"),
    Key("s", "toggle", "Side", True, "Toggle side by side", "Unified or side-by-side diff (s)", ("side",)),
    Key("f", "toggle", "Fold", False, "Toggle folding", "Fold unchanged diff lines or show all (f)", ("fold",)),
    Key("u", "toggle", "Hide unchanged", False, "Hide unchanged passes",
        "Hide passes that changed nothing (u)", ("unchanged",)),
    Key("c", "next_chain", "Chain", True, "Next chain", "Forward, backward, ... (c)"),
    Key("g", "next_graph", "Graph", False, "Next graph", "The next compiled graph (g)"),
    Key("j", "jump", "Jump", False, "Jump to pass", "Pick a pass of this chain (j)"),
    Key("k", "kernels", "Kernels", True, "Kernels", "The kernels table: sort, re-run, repro (k)"),
    Key("N", "numerics", "Numerics", False, "Numerics",
        "Kernels by verdict of run --check-numerics; enter: kernel + bisect (N)"),
    Key("B", "bisect", "Bisect", False, "Bisect",
        "Run every pass of the chain shown on the same inputs: which pass changes the numbers (B)"),
    Key("slash", "search", "Search", True, "Search", "Symbols, source lines, kernels (/)"),
    Key("e", "edit", "Editor", False, "Open in editor", "The selected line's source in $EDITOR (e)"),
    Key("i", "toggle", "Details", True, "Toggle details", "Show or hide the details pane (i)", ("details",)),
    Key("t", "run_info", "Run", False, "Run info", "Run status, eager chains, traceback (t)"),
    Key("m", "communication", "Comm", False, "Communication",
        "Collectives in the traces and between graphs, per place (m)"),
    Key("S", "source", "Source", False, "Source",
        "Your files line by line: ops, kernels, torch fallbacks, time share (S)"),
    Key("question_mark", "help", "Help", True, "Keys", "Every key binding (?)"),
]


def bindings() -> list[Binding]:
    """Return the app's key bindings (``BINDINGS``), from :data:`KEYS`."""
    return [Binding(k.key, f"{k.action}({', '.join(map(repr, k.args))})" if k.args else k.action, k.label, show=k.show)
            for k in KEYS]


def palette_entries(app) -> list[tuple[str, str, object]]:
    """Return (title, help, callback) for every action of ``app`` (a ``ThundervisApp``) in the
    palette, the group ones only when it shows a group."""
    def call(k: Key):
        method = getattr(app, f"action_{k.action}")
        return lambda: method(*k.args)
    return [(k.title, k.help, call(k)) for k in KEYS if k.title and (not k.group or app.group is not None)]
