"""Pass diffs with their labels: the one rule that names each side of a
:class:`thundervis.diff.TraceDiff`, so a diff reads the same in ``thundervis diff``, the TUI, the widget and the
rank comparisons: ``graph 0 forward after 3 fuse``, prefixed with ``rank 2 · `` or a title when
the sides come from different recordings."""
from __future__ import annotations

from typing import Optional

from thundervis.safe_text import visible_line


def pass_label(graph: int, chain: str, pass_, *, rank: Optional[int] = None, title: Optional[str] = None) -> str:
    """Return the label of one side of a diff: ``pass_`` (a ``PassInfo``, or ``(index, name)``) of
    ``chain`` of ``graph``, with ``title · `` and ``rank N · `` in front when given; recorded text
    made terminal-safe."""
    index, name = pass_ if isinstance(pass_, tuple) else (pass_.index, pass_.name)
    head = [t for t in (title, f"rank {rank}" if rank is not None else None) if t]
    text = f"graph {graph} {chain} after {index} {name}"
    return visible_line(" · ".join(head + [text]))


def labelled(diff, graph: int, chain: str, pass_a, pass_b, *, ranks=(None, None), titles=(None, None)):
    """Return ``diff`` (a :class:`thundervis.diff.TraceDiff` of ``pass_a`` -> ``pass_b`` of one
    chain, or of the same pass on two ranks or recordings) with its sides labelled by
    :func:`pass_label`; ``ranks`` and ``titles`` name each side's rank or recording."""
    diff.before = pass_label(graph, chain, pass_a, rank=ranks[0], title=titles[0])
    diff.after = pass_label(graph, chain, pass_b, rank=ranks[1], title=titles[1])
    return diff
