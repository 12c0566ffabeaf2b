"""Folded layers in a pass diff: what a pass did to 24 or 80 equal decoder layers, shown once for
the first of them and then as one line, ``▸ model.layers.2–23 × 22 more: the same changes as
model.layers.1 above``.

A diff's rows are cut into layer instances as a printed trace's lines are
(``present.trace_folds``): a top-level row belongs to the layer its symbol's module path names
(a symbol naming none, and every ``del`` and subsymbol row, stays in the layer before it; the
signature and return rows in none). Two instances are equal when, row by row, they have the same
status and pairing, and on each side the same depth, op (a kernel's number masked), executor and
output shapes and dtypes; value names and the layer index are not compared. A pass that moves
ops across a layer boundary (a backward fusion of layer 22's ops placed among layer 21's) makes
a layer's rows several instances: they are one unit, from where the layer first appears
(:func:`_units`). Runs of equal units of consecutive layers fold by ``present.trace_folds.instance_folds``: one rule, one
wording. One linear walk over the rows.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from .align import UNCHANGED
from thundervis.present.kernel_folds import layer_of
from thundervis.present.trace_folds import instance_folds, open_layers

SAME = "the same changes"  # what a diff's hidden instances share with the shown one
_NUMBER = re.compile(r"\d+$")  # a kernel's number: fw_fusion_3 and fw_fusion_9 are the same op


def _side(line) -> Optional[tuple]:
    """What of one side of a row must be equal in two instances (None: the side is empty)."""
    if line is None:
        return None
    b = line.symbol
    if b is None:
        return (line.uid,)
    outs = tuple((tuple(p.shape), str(p.dtype)) for p in b.flat_outputs())
    return (line.depth, _NUMBER.sub("#", b.sym), b.executor if line.depth == 0 else None, outs)


def _row_shape(d) -> tuple:
    """What of diff row ``d`` must be equal in two instances."""
    return (d.status, d.how, len(d.partners), _NUMBER.sub("#", d.kernel) if d.kernel else None,
            _side(d.a), _side(d.b))


def _instances(rows: Sequence) -> list:
    """Return ``[(head, index, start, end, shape)]``: each maximal run of diff rows of one layer."""
    out, layer, start, shape = [], None, 0, []
    for i, d in enumerate(rows):
        line = d.b if d.b is not None else d.a
        b = line.symbol
        now = layer
        if b is None:  # the signature or the return
            now = None
        elif line.depth == 0 and b.sym != "del":
            module = b.source.module if b.source is not None else None
            now = layer if not module else layer_of(module)
        if now != layer:
            if layer is not None:
                out.append((layer[0], layer[1], start, i, tuple(shape)))
            layer, start, shape = now, i, []
        if layer is not None and not (b is not None and b.sym == "del"):
            shape.append(_row_shape(d))
    if layer is not None:
        out.append((layer[0], layer[1], start, len(rows), tuple(shape)))
    return out


def _units(found: Sequence) -> list:
    """Return ``found`` (instances) grouped into one unit per layer, in the shape
    :func:`~thundervis.present.trace_folds.instance_folds` takes: a unit starts where a layer's
    index first appears and takes the instances right after it whose layers appeared before (a
    pass that fuses across a layer boundary leaves layer 22's fusion among layer 21's rows). A
    unit's shape holds its instances' shapes and their layers relative to its own."""
    out, seen = [], set()
    for head, index, start, end, shape in found:
        last = out[-1] if out else None
        if (head, index) in seen and last is not None and last[0] == head and last[3] == start:
            out[-1] = (head, last[1], last[2], end, last[4] + ((index - last[1], shape),))
        else:
            seen.add((head, index))
            out.append((head, index, start, end, ((0, shape),)))
    return out


def diff_folds(diff) -> tuple:
    """Return the ``present.trace_folds.LayerFold`` s of a :class:`~.align.TraceDiff`: runs of
    equal layer instances, ``start``/``end`` indexing ``diff.lines``, labelled "the same changes".
    Layers the pass left unchanged do not fold here: they are unchanged lines, folded as those are."""
    rows = diff.lines
    return tuple(f for f in instance_folds(_units(_instances(rows)), SAME)
                 if any(rows[i].status != UNCHANGED for i in range(f.start, f.end)))


def open_diff_layers(diff, folds: Sequence, paths: Sequence) -> tuple:
    """Return ``folds`` (:func:`diff_folds` of ``diff``) with the changes to each layer of
    ``paths`` (``model.layers.5``) shown in place, the layers around it still folded, as
    ``show --layer`` opens a printed trace; ``DataError`` with one sentence for a malformed path
    or a layer that is not in this pass."""
    return open_layers(diff.lines, folds, paths, instances=_units(_instances(diff.lines)))
