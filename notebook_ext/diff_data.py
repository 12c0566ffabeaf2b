"""The side-by-side diff as the widget sends it: :func:`diff_json` turns a
:class:`~thundervis.diff.TraceDiff` into folded rows (folded here, once: the browser only draws),
:func:`unfolded` opens the folds again, and :class:`Interner` numbers repeated items so a payload
holding many diffs and passes sends each distinct line, info and source once."""
from __future__ import annotations

from typing import Optional

from thundervis.diff.render import fold_runs, side_rows

# Unchanged diff rows kept around each change; the rest is folded (in Python, once).
DIFF_CONTEXT = 3


class Interner:
    """Numbers equal JSON-able items so each distinct one is sent once; ``key`` (hashable, made
    from the item's values) names the item, so nothing is JSON-encoded to compare: the payload
    is encoded once, when it is sent."""

    def __init__(self):
        self.items: list = []
        self._index: dict = {}

    def add(self, item, key) -> int:
        """Return the number of the item named ``key`` (``item`` appended when it is new)."""
        n = self._index.get(key)
        if n is None:
            n = self._index[key] = len(self.items)
            self.items.append(item)
        return n



def diff_json(d, graph: int, chain: str, a: int, b: int, sources: Optional[Interner] = None) -> dict:
    """Return a TraceDiff as JSON: its labels, counts, summary and the rows of
    :func:`thundervis.diff.render.side_rows`, folded (:func:`~thundervis.diff.render.fold_runs`,
    :data:`DIFF_CONTEXT` rows of context: a run of unchanged rows becomes ``["fold", None, None,
    text, [rows]]``), as ``[status, left, right, note]`` with each cell
    ``[marker, depth, text, spans, uid, source]`` or None (``source``: the text, or with
    ``sources`` its index there, so a payload holding many diffs sends each source line once)."""
    def cell(r):
        if r is None:
            return None
        src = sources.add(r.source, key=r.source) if sources is not None else r.source
        return [r.marker, r.depth, r.text, [list(s) for s in r.spans], r.uid, src]
    def row(s):
        return [s.status, cell(s.left), cell(s.right), s.note]
    rows = []
    for x in fold_runs(side_rows(d), DIFF_CONTEXT):  # folded here, once: the browser only draws
        if isinstance(x, list):
            n = len(x)
            rows.append(["fold", None, None, f"… {n} unchanged line{'s' if n != 1 else ''} (click to show) …",
                         [row(s) for s in x]])
        else:
            rows.append(row(x))
    return {"graph": graph, "chain": chain, "a": a, "b": b, "before": d.before, "after": d.after,
            "counts": d.counts(), "summary": d.summary(), "rows": rows}


def unfolded(rows: list) -> list:
    """Return the rows of a :func:`diff_json` with its folds opened (every side-by-side row)."""
    out = []
    for r in rows:
        out.extend(r[4] if r[0] == "fold" else [r])
    return out

