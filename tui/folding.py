"""The trace pane's signature fold: a pass's ``def`` line and its inputs' metadata comment (30
lines on a small model, 300+ on a 24-layer one) shown as one line, ``34 inputs ▸``, until the user
opens it (enter or a click on that line), so the first screen shows the trace's ops.

The block is found by the printer's line kinds (``def``, ``meta``), never by matching text. The
shown lines keep a fold line in front of the block whether it is open (``▾``) or closed (``▸``),
so enter on the same line toggles it both ways; :class:`FoldedLines` maps line numbers between
the printed lines (search hits, the numerics marks) and the shown ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from thundervis.present.line_kinds import COMMENT, DEF, META, TYPE, PrintedLine
from thundervis.present.units import plural

FOLD = "fold"  # the kind of the line standing for the signature block
_BLOCK = (DEF, META)


@dataclass(frozen=True)
class FoldedLines:
    """The lines a trace pane shows: ``lines``; the signature block ``start``..``end`` of the
    printed lines (``start`` -1: there is none) is replaced by one fold line when ``folded``, and
    follows the fold line when open."""

    lines: list
    start: int
    end: int
    folded: bool

    def shown_index(self, printed: int) -> int:
        """Return the shown line of printed line ``printed`` (a line inside a closed block: the
        fold line)."""
        if self.start < 0 or printed < self.start:
            return printed
        if self.folded:
            return self.start if printed < self.end else printed - (self.end - self.start) + 1
        return printed + 1

    def is_fold_line(self, shown: int) -> bool:
        """Return whether shown line ``shown`` is the fold line."""
        return self.start >= 0 and shown == self.start

    def hides(self, printed: int) -> bool:
        """Return whether printed line ``printed`` is inside the closed block."""
        return self.folded and self.start <= printed < self.end


def signature_block(lines: Sequence) -> tuple[int, int]:
    """Return ``(start, end)`` of the first run of ``def``/``meta`` lines in ``lines`` (printed
    lines), or ``(-1, -1)`` when there is none."""
    for i, ln in enumerate(lines):
        if ln.kind in _BLOCK:
            end = i
            while end < len(lines) and lines[end].kind in _BLOCK:
                end += 1
            return i, end
        if ln.kind not in ("header",):  # the block follows the header: stop at the first op
            break
    return -1, -1


def input_count(block: Sequence) -> Optional[int]:
    """Return the number of inputs the block's ``meta`` lines describe (one ``type`` span per
    input), or None when the block has no metadata comment."""
    metas = [ln for ln in block if ln.kind == META]
    if not metas:
        return None
    return sum(1 for ln in metas for sp in ln.spans if sp[2] == TYPE)


def fold_line(block: Sequence, folded: bool) -> PrintedLine:
    """Return the line standing for ``block``: ``34 inputs ▸`` (closed) or ``▾`` (open)."""
    n = input_count(block)
    what = plural(n, "input") if n is not None else f"signature, {plural(len(block), 'line')}"
    text = f"  {what} {'▸' if folded else '▾'}"
    return PrintedLine(text, FOLD, None, 0, ((2, len(text), COMMENT),))


def fold_signature(lines: Sequence, folded: bool = True) -> FoldedLines:
    """Return the lines to show for printed ``lines``: the signature block behind a fold line,
    closed when ``folded``. Lines of other kinds (plain text, no block) come back unchanged."""
    start, end = signature_block(lines)
    if start < 0:
        return FoldedLines(list(lines), -1, -1, folded)
    head = fold_line(lines[start:end], folded)
    shown = list(lines[:start]) + [head] + ([] if folded else list(lines[start:end])) + list(lines[end:])
    return FoldedLines(shown, start, end, folded)
