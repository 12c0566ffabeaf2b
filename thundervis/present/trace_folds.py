"""Folded layers in a printed trace: the 24 or 80 decoder layers of a pass shown as the first
instance's lines and one fold line, ``▸ model.layers.2–22 × 21 more: the same ops and shapes as
model.layers.1 above``, until the user opens it.

A line belongs to the layer its source comment names (the printer's ``module`` span, read as
:func:`.kernel_folds.layer_of` reads it): the lines from one source comment to the next share its
module path (a comment that names none, a backward gradient's sum, stays in the layer before it).
A layer's *instance* is a maximal run of lines of one layer index. Consecutive
instances of one block (``model.layers``), their indices counting up (forward) or down (backward)
by one, fold when their structure is equal: line by line the same kinds, depths, ops (a kernel's
name without its number), executors, shapes and dtypes, and source comments equal but for the layer
index. Value names are not compared (each layer has its own); ``del`` lines are not either (what a
layer frees is bookkeeping, not an op). A run of at least :data:`~.kernel_folds.FOLD_AT` instances
folds, as the kernel table's rows do, so a 2-layer model shows both layers. The first and last
layers usually differ (a fusion reaching into the embedding or the final norm) and stay shown.

``thundervis show`` prints :func:`shown_lines`: the same fold lines in place of the hidden ones;
:func:`open_layers` cuts named instances (``model.layers.5``) out of their folds, so they print in
place and the layers around them stay folded.

Folds are computed from the printed lines alone, once per pass (:func:`pass_folds`, memoised in
the view's ``PassTraces``), in one linear walk. Front ends lay them out: the TUI's trace pane and
the widget's Passes tab show :func:`fold_line` in place of the hidden lines and open a fold on
Enter or a click, or when a search, a source line or a kernel lands inside it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from .kernel_folds import FOLD_AT, layer_of
from .line_kinds import CALL, COMMENT, DEL, EXECUTOR, META, MODULE, SOURCE, STMT, SUB, TYPE, PrintedLine

FOLD = "fold"  # the kind of a fold line (the TUI's signature fold line has the same kind)
_NUMBER = re.compile(r"\d+$")  # a kernel's number: fw_fusion_3 and fw_fusion_9 are the same op
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|\]|$)")  # a module path's numbered parts


@dataclass(frozen=True)
class LayerFold:
    """One fold of printed lines: the instance of layer ``shown`` of block ``head`` stays on
    screen (printed lines ``shown_start``..``start``); the instances of layers ``indices`` (in
    trace order) are printed lines ``start``..``end``, hidden behind one fold line (a diff's
    folds index its rows, and ``same`` says "the same changes")."""

    head: str
    shown: int
    indices: tuple
    shown_start: int
    start: int
    end: int
    same: str = "the same ops and shapes"  # what the hidden instances share with the shown one

    @property
    def count(self) -> int:
        """How many instances are hidden (the shown one not counted)."""
        return len(self.indices)

    def _path(self, index) -> str:
        return f"{self.head}.{index}" if self.head else str(index)

    @property
    def key(self) -> str:
        """The hidden layers, ``model.layers.2–22``: what a view remembers a fold as opened by."""
        lo, hi = min(self.indices), max(self.indices)
        return self._path(f"{lo}–{hi}" if lo != hi else lo)  # one left after an instance was opened

    @property
    def label(self) -> str:
        """``model.layers.2–22 × 21 more: the same ops and shapes as model.layers.1 above``."""
        return f"{self.key} × {self.count} more: {self.same} as {self._path(self.shown)} above"

    def hides(self, printed: int) -> bool:
        """Return whether printed line ``printed`` is one this fold hides."""
        return self.start <= printed < self.end

    def as_json(self) -> dict:
        """Return ``{key, label, head, shown, indices, count, shown_start, start, end}`` (line
        numbers index the pass's printed lines)."""
        return {"key": self.key, "label": self.label, "head": self.head, "shown": self.shown,
                "indices": list(self.indices), "count": self.count, "shown_start": self.shown_start,
                "start": self.start, "end": self.end}


def fold_line(fold: LayerFold, opened: bool = False) -> PrintedLine:
    """Return the line a view shows in front of ``fold``'s hidden lines: ``▸ label`` closed, ``▾
    label`` open (kind ``fold``, no uid)."""
    text = f"  {'▾' if opened else '▸'} {fold.label}"
    return PrintedLine(text, FOLD, None, 0, ((2, len(text), COMMENT),))


def _module(line) -> Optional[str]:
    """The module path a source comment names (its ``module`` span, brackets off)."""
    for a, e, k in line.spans:
        if k == MODULE:
            return line.text[a:e].strip("[]")
    return None


def _shape(line) -> tuple:
    """What of a line must be equal in two instances: kind, depth, ops (numbers off kernel names),
    executors, types; a source comment's file, code and module with its layer index masked."""
    if line.kind == SOURCE:
        parts = tuple(_INDEX.sub("#", line.text[a:e]) if k == MODULE else line.text[a:e]
                      for a, e, k in line.spans if k != COMMENT)
        return (SOURCE,) + parts
    parts = tuple(_NUMBER.sub("#", line.text[a:e]) if k == CALL else line.text[a:e]
                  for a, e, k in line.spans if k in (CALL, TYPE, EXECUTOR))
    return (line.kind, line.depth) + parts


def _instances(lines: Sequence) -> list:
    """Return ``[(head, index, start, end, shape)]``: each maximal run of lines of one layer."""
    out, layer, start, shape = [], None, 0, []
    for i, ln in enumerate(lines):
        now = layer
        if ln.kind == SOURCE:
            module = _module(ln)  # a comment naming no module (a gradient's sum) stays in the layer
            now = layer if module is None else layer_of(module)
        elif ln.kind not in (STMT, SUB, DEL):  # header, signature, return: no layer's
            now = None
        if now != layer:
            if layer is not None:
                out.append((layer[0], layer[1], start, i, tuple(shape)))
            layer, start, shape = now, i, []
        if layer is not None and ln.kind != DEL:
            shape.append(_shape(ln))
    if layer is not None:
        out.append((layer[0], layer[1], start, len(lines), tuple(shape)))
    return out


def layer_folds(lines: Sequence) -> tuple:
    """Return the :class:`LayerFold` s of a pass's printed lines (``PrintedLine`` s), in line
    order: each run of at least :data:`FOLD_AT` adjacent, equal instances of consecutive layers."""
    return instance_folds(_instances(lines))


def instance_folds(found: Sequence, same: str = "the same ops and shapes") -> tuple:
    """Return the :class:`LayerFold` s of ``found``, a view's rows cut into layer instances
    (``[(head, index, start, end, shape)]`` in row order; ``shape``: what must be equal): each run
    of at least :data:`FOLD_AT` adjacent instances of consecutive layers with equal shapes. A pass's
    printed lines are cut by :func:`layer_folds`, a diff's rows by ``thundervis.diff.layer_folds``;
    ``same`` says in the label what the hidden instances share."""
    folds, i = [], 0
    while i < len(found):
        head, index, start, end, shape = found[i]
        j, step = i + 1, None
        while j < len(found):
            h, k, s, _e, sh = found[j]
            d = k - found[j - 1][1]
            if h != head or s != found[j - 1][3] or sh != shape or d not in (1, -1) or (step is not None and d != step):
                break
            step, j = d, j + 1
        if j - i >= FOLD_AT:
            folds.append(LayerFold(head, index, tuple(f[1] for f in found[i + 1:j]), start, found[i + 1][2],
                                   found[j - 1][3], same))
            i = j
        else:
            i += 1
    return tuple(folds)


def pass_folds(traces, graph: int, chain: str, index: int) -> tuple:
    """Return the :class:`LayerFold` s of one pass's printed lines (``traces``: the view's
    ``PassTraces``), memoised there; ``DataError`` for a pass that cannot be read."""
    from .trace_lines import pass_lines
    return traces.cached_value("layer folds", (graph, chain, index),
                               lambda: layer_folds(pass_lines(traces, graph, chain, index)))


def fold_of(folds: Sequence, printed: int) -> Optional[LayerFold]:
    """Return the fold of ``folds`` that hides printed line ``printed``, None when none does."""
    lo, hi = 0, len(folds)
    while lo < hi:  # folds are in line order and do not overlap
        mid = (lo + hi) // 2
        if folds[mid].end <= printed:
            lo = mid + 1
        else:
            hi = mid
    return folds[lo] if lo < len(folds) and folds[lo].hides(printed) else None


def folds_json(folds: Sequence) -> list:
    """Return ``folds`` as the widget lays them out: :meth:`LayerFold.as_json` plus ``line`` and
    ``open_line``, the texts of :func:`fold_line` closed and open."""
    return [dict(f.as_json(), line=fold_line(f).text, open_line=fold_line(f, True).text) for f in folds]


_LAYER = re.compile(r"(?:((?:[^\W\d]\w*)(?:\.[^\W\d]\w*)*)\.)?(\d+)")  # model.layers.5: named parts, then the index


def parse_layer(path) -> tuple:
    """Return ``(block head, index)`` of a layer named as ``model.layers.5`` (a block path whose
    parts are names, then the index); ``DataError`` with one sentence for anything else."""
    from .errors import DataError
    m = _LAYER.fullmatch(path) if isinstance(path, str) else None
    if m is None:
        raise DataError(f"{path!r} does not name a layer; name one as its block and index, e.g. model.layers.5.")
    return m.group(1) or "", int(m.group(2))


def fold_instances(lines: Sequence, fold: LayerFold) -> tuple:
    """Return ``((index, start, end), ...)``: where each instance ``fold`` hides lies in the pass's
    printed ``lines`` (the ones it was found in), in trace order."""
    part = _instances(lines[fold.start:fold.end])
    return tuple((index, fold.start + s, fold.start + e) for _head, index, s, e, _shape in part)


def _cut(spans: Sequence, fold: LayerFold, index: int) -> tuple:
    """Return the folds left of ``fold`` once instance ``index`` is shown (``spans``: where each
    instance it hides lies, as :func:`fold_instances` returns them): the instances before it and
    those after it (in trace order), each a fold of its own when there are any."""
    at = next(i for i, s in enumerate(spans) if s[0] == index)
    out = []
    for part in (spans[:at], spans[at + 1:]):
        if part:
            out.append(replace(fold, indices=tuple(s[0] for s in part), start=part[0][1], end=part[-1][2]))
    return tuple(out)


def open_layers(lines: Sequence, folds: Sequence, paths: Sequence, instances: Optional[Sequence] = None) -> tuple:
    """Return ``folds`` (of the printed ``lines``) with each layer of ``paths`` (``model.layers.5``)
    shown: its instance cut out of the fold that hid it, the instances around it still folded. A
    layer the pass shows anyway is accepted as it is; ``DataError`` with one sentence for a
    malformed path or a layer that is not in this pass. ``instances``: the rows cut into layer
    instances as the folds were found (a diff's units), when they are not a pass's printed lines."""
    from .errors import DataError
    folds = list(folds)
    found = _instances(lines) if instances is None else list(instances)
    for path in paths:
        head, index = parse_layer(path)
        f = next((f for f in folds if f.head == head and index in f.indices), None)
        if f is not None:
            at = folds.index(f)
            spans = (fold_instances(lines, f) if instances is None else
                     tuple((i, s, e) for h, i, s, e, _ in found if h == f.head and f.start <= s and e <= f.end))
            folds[at:at + 1] = _cut(spans, f, index)
        elif not any(h == head and i == index for h, i, *_ in found):
            known = ", ".join(f.key for f in folds)
            raise DataError(f"{path} is not a layer of this pass; " +
                            (f"its folded layers are {known}." if known else "it has no folded layers."))
    return tuple(folds)


def shown_lines(lines: Sequence, folds: Sequence) -> list:
    """Return the printed ``lines`` as a view shows them with ``folds`` closed: each fold's hidden
    lines replaced by its :func:`fold_line`."""
    out, at = [], 0
    for f in folds:
        out.extend(lines[at:f.start])
        out.append(fold_line(f))
        at = f.end
    out.extend(lines[at:])
    return out


def _carried(folds: Sequence, src: Sequence, dst: Sequence) -> tuple:
    """Return ``folds`` of the printed lines ``src`` moved onto ``dst``, the same trace printed
    without shapes (no inputs' metadata comment, so the same lines but those): () when the two do
    not match line for line."""
    keep = [i for i, ln in enumerate(src) if ln.kind != META]
    if len(keep) != len(dst) or any(src[i].uid != d.uid or src[i].kind != d.kind for i, d in zip(keep, dst)):
        return ()
    at = {i: n for n, i in enumerate(keep)}
    at[len(src)] = len(dst)
    return tuple(replace(f, shown_start=at[f.shown_start], start=at[f.start], end=at[f.end]) for f in folds)


def folded_text(rec, trace, graph: int, chain: str, *, fold: bool = True, layers: Sequence = (),
                signature: bool = False, **options) -> str:
    """Return ``trace`` (a pass of ``chain`` of ``graph`` of ``rec``) printed as ``show`` prints
    it: the lines of ``present.trace_lines.trace_text`` (``options``: ``uids``, ``source``,
    ``shapes``), with its repeated layers folded (``fold``) but for the instances ``layers`` names
    (:func:`open_layers`), and with ``fold`` its signature block behind one line
    (``present.signature_fold``) unless ``signature``; ``DataError`` for a bad layer or events
    that cannot be read."""
    from .trace_lines import print_options
    from thundervis.compiler.printer import print_lines
    opts = print_options(rec, graph, chain, **options)
    lines = print_lines(trace, opts)
    folds = ()
    if fold and not opts.shapes:  # layers fold on their shapes too: found with them, then carried over
        full = print_lines(trace, replace(opts, shapes=True))
        folds = _carried(layer_folds(full), full, lines)
    elif fold:
        folds = layer_folds(lines)
    folds = open_layers(lines, folds, layers) if fold else ()
    shown = shown_lines(lines, folds)
    if fold and not signature:  # the block precedes every layer: found on the shown lines alike
        from .signature_fold import folded_signature
        shown = folded_signature(shown)
    return "\n".join(ln.text for ln in shown) + "\n"
