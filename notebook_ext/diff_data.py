"""The side-by-side diff as the widget sends it: :func:`diff_json` turns a
:class:`~thundervis.diff.TraceDiff` into folded rows (folded here, once: the browser only draws),
:func:`unfolded` opens the folds again (the unchanged runs and the repeated layers), and
:class:`Interner` numbers repeated items so a payload holding many diffs and passes sends each
distinct line, info and source once."""
from __future__ import annotations

from typing import Optional

from thundervis.diff.layer_folds import diff_folds
from thundervis.diff.render import FOLD, SideRow, fold_runs, layer_fold_text, side_rows

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



def diff_json(d, graph: int, chain: str, a: int, b: int, sources: Optional[Interner] = None,
              layers: bool = True) -> dict:
    """Return a TraceDiff as JSON: its labels, counts, summary and the rows of
    :func:`thundervis.diff.render.side_rows`, folded (:func:`~thundervis.diff.render.fold_runs`,
    :data:`DIFF_CONTEXT` rows of context: a run of unchanged rows becomes ``["fold", None, None,
    text, [rows]]``; what the pass did to a run of equal layers, as ``thundervis diff`` folds it
    (``thundervis.diff.layer_folds``), becomes ``["layer", None, None, text, [rows], key,
    open_text]``, its texts those of ``render.layer_fold_text`` closed and open), as ``[status,
    left, right, note]`` with each cell ``[marker, depth, text, spans, uid, source]`` or None
    (``source``: the text, or with ``sources`` its index there, so a payload holding many diffs
    sends each source line once). ``layers`` False: no layer folds (a rank diff: ``thundervis diff
    --ranks`` folds none either)."""
    def cell(r):
        if r is None:
            return None
        src = sources.add(r.source, key=r.source) if sources is not None else r.source
        return [r.marker, r.depth, r.text, [list(s) for s in r.spans], r.uid, src]

    every = side_rows(d)  # one row per diff line: a fold's start and end index both
    folds = {f.key: f for f in diff_folds(d)} if layers else {}

    def rows_of(part: list) -> list:
        out = []
        for x in fold_runs(part, DIFF_CONTEXT):  # folded here, once: the browser only draws
            if isinstance(x, list):
                n = len(x)
                out.append(["fold", None, None, f"… {n} unchanged line{'s' if n != 1 else ''} (click to show) …",
                            [[s.status, cell(s.left), cell(s.right), s.note] for s in x]])
            elif x.fold:
                f = folds[x.fold]
                out.append(["layer", None, None, layer_fold_text(f), rows_of(every[f.start:f.end]), f.key,
                            layer_fold_text(f, True)])
            else:
                out.append([x.status, cell(x.left), cell(x.right), x.note])
        return out

    top, at = [], 0
    for f in folds.values():
        top.extend(every[at:f.start])
        top.append(SideRow(FOLD, None, None, layer_fold_text(f), fold=f.key))
        at = f.end
    top.extend(every[at:])
    return {"graph": graph, "chain": chain, "a": a, "b": b, "before": d.before, "after": d.after,
            "counts": d.counts(), "summary": d.summary(), "rows": rows_of(top)}


def unfolded(rows: list) -> list:
    """Return the rows of a :func:`diff_json` with its folds opened (every side-by-side row, the
    layers folded included)."""
    out = []
    for r in rows:
        out.extend(unfolded(r[4]) if r[0] in ("fold", "layer") else [r])
    return out
