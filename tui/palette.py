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


# key | action(args) | footer label | flags (footer: shown in the footer, group: only on a group of
# ranks) | palette title (none: not in the palette) | palette help. The two group keys come first, so
# 80 columns show them.
TABLE = """
q             | quit                | Quit           | footer       |                       |
ctrl+r        | pick_rank           | Rank           | footer group | Switch rank           | Pick a rank of the group: status, variant, host, times (ctrl+r)
equals_sign   | compare_ranks       | Compare        | footer group | Compare ranks         | Identical traces? Variants, differing passes, kernel skew (=)
n             | step(1)             | Next           | footer       | Next pass             | Step to the next pass (n)
p             | step(-1)            | Prev           | footer       | Previous pass         | Step to the previous pass (p)
d             | toggle('diff')      | Diff           | footer       | Toggle diff           | Diff against the previous pass (d)
D             | diff_against        | Diff vs…       |              | Diff against pass     | Diff against a chosen pass (D)
s             | toggle('side')      | Side           | footer       | Toggle side by side   | Unified or side-by-side diff (s)
f             | toggle('fold')      | Fold           |              | Toggle folding        | Fold unchanged diff lines or show all (f)
u             | toggle('unchanged') | Hide unchanged |              | Hide unchanged passes | Hide passes that changed nothing (u)
c             | next_chain          | Chain          | footer       | Next chain            | Forward, backward, ... (c)
g             | next_graph          | Graph          |              | Next graph            | The next compiled graph (g)
j             | jump                | Jump           |              | Jump to pass          | Pick a pass of this chain (j)
k             | kernels             | Kernels        | footer       | Kernels               | The kernels table: sort, re-run, repro (k)
N             | numerics            | Numerics       |              | Numerics              | Kernels by verdict of run --check-numerics; enter: kernel + bisect (N)
B             | bisect              | Bisect         |              | Bisect                | Run every pass of the chain shown on the same inputs: which pass changes the numbers (B)
slash         | search              | Search         | footer       | Search                | Symbols, source lines, kernels (/)
e             | edit                | Editor         |              | Open in editor        | The selected line's source in $EDITOR (e)
i             | toggle('details')   | Details        | footer       | Toggle details        | Show or hide the details pane (i)
t             | run_info            | Run            |              | Run info              | Run status, eager chains, traceback (t)
m             | communication       | Comm           |              | Communication         | Collectives in the traces and between graphs, per place (m)
S             | source              | Source         |              | Source                | Your files line by line: ops, kernels, torch fallbacks, time share (S)
M             | memory              | Memory         |              | Memory                | Saved-for-backward tensors, the static peak and timeline, the remat what-if (M)
question_mark | help                | Help           | footer       | Keys                  | Every key binding (?)
"""


def _parse(table: str) -> list[Key]:
    """Return the :class:`Key` of each row of ``table`` (our own constant, read once)."""
    import ast
    keys = []
    for row in table.strip().splitlines():
        key, action, label, flags, title, help_text = (c.strip() for c in row.split("|", 5))
        name, _, args = action.partition("(")
        parsed = ast.literal_eval(f"({args.rstrip(')')},)") if args else ()
        keys.append(Key(key, name, label, "footer" in flags.split(), title, help_text, parsed,
                        "group" in flags.split()))
    return keys


KEYS = _parse(TABLE)


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
