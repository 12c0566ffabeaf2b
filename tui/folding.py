"""The trace pane's folds. The signature fold: a pass's ``def`` line and its inputs' metadata
comment shown as one line, ``34 inputs ▸``, until the user opens it (enter or a click on that
line) (``present.signature_fold`` finds and words it, for ``show`` too). The layer folds: a run of
equal layers (``present.trace_folds``, which finds and words them) shown as the first layer's
lines and one line, ``▸ model.layers.2–22 × 21 more: …``, opened the same way.

The shown lines keep a fold line in front of the block whether it is open (``▾``) or closed (``▸``),
so enter on the same line toggles it both ways; :class:`FoldedLines` maps line numbers between
the printed lines (search hits, the numerics marks) and the shown ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from thundervis.present.line_kinds import PrintedLine
from thundervis.present.signature_fold import FOLD, SIGNATURE, input_count, signature_block  # noqa: F401
from thundervis.present.signature_fold import signature_line as fold_line
from thundervis.present.trace_folds import fold_line as layer_fold_line


@dataclass(frozen=True)
class Block:
    """Printed lines ``start``..``end`` shown behind the fold line ``head`` (``folded``: hidden);
    ``key``: :data:`SIGNATURE` or a ``present.trace_folds.LayerFold``'s key."""

    start: int
    end: int
    folded: bool
    head: PrintedLine
    key: str


class FoldedLines:
    """The lines a trace pane shows: ``lines``, the printed lines with each block of ``blocks``
    (in line order, none overlapping) behind its fold line, hidden when folded. A fold line stays
    in front of its block whether it is open or closed, so enter on it toggles it both ways.
    ``start``, ``end`` and ``folded`` describe the signature block (``start`` -1: there is none)."""

    def __init__(self, printed: Sequence, blocks: Sequence[Block]):
        self.blocks = tuple(blocks)
        sig = next((b for b in self.blocks if b.key == SIGNATURE), None)
        self.start, self.end = (sig.start, sig.end) if sig is not None else (-1, -1)
        self.folded = sig.folded if sig is not None else True
        self.lines: list = []
        self._shown_of: list = []  # printed line -> shown line (a hidden one: its fold line)
        self._head_at: dict = {}  # shown line -> the block whose fold line it is
        at = 0
        for b in self.blocks:
            self._take(printed, at, b.start)
            self._head_at[len(self.lines)] = b
            self.lines.append(b.head)
            if b.folded:
                self._shown_of.extend([len(self.lines) - 1] * (b.end - b.start))
            else:
                self._take(printed, b.start, b.end)
            at = b.end
        self._take(printed, at, len(printed))

    def _take(self, printed: Sequence, a: int, e: int) -> None:
        self._shown_of.extend(range(len(self.lines), len(self.lines) + e - a))
        self.lines.extend(printed[a:e])

    def shown_index(self, printed: int) -> int:
        """Return the shown line of printed line ``printed`` (a line inside a closed block: its
        fold line)."""
        if 0 <= printed < len(self._shown_of):
            return self._shown_of[printed]
        return printed + len(self.lines) - len(self._shown_of)

    def block_at(self, shown: int) -> Optional[Block]:
        """Return the block whose fold line is shown line ``shown``, None for another line."""
        return self._head_at.get(shown)

    def is_fold_line(self, shown: int) -> bool:
        """Return whether shown line ``shown`` is a fold line."""
        return shown in self._head_at

    def hiding(self, printed: int) -> Optional[Block]:
        """Return the closed block that hides printed line ``printed``, None when it is shown."""
        return next((b for b in self.blocks if b.folded and b.start <= printed < b.end), None)

    def hides(self, printed: int) -> bool:
        """Return whether printed line ``printed`` is inside a closed block."""
        return self.hiding(printed) is not None


def fold_signature(lines: Sequence, folded: bool = True, layers: Sequence = (),
                   opened: frozenset = frozenset()) -> FoldedLines:
    """Return the lines to show for printed ``lines``: the signature block behind a fold line,
    closed when ``folded``, and each layer fold of ``layers`` (``present.trace_folds.LayerFold`` s
    of these lines) behind its fold line, closed unless ``opened`` holds its key. Lines of other
    kinds (plain text, no block) come back unchanged."""
    blocks = []
    start, end = signature_block(lines)
    if start >= 0:
        blocks.append(Block(start, end, folded, fold_line(lines[start:end], folded), SIGNATURE))
    for f in layers:
        if f.end <= len(lines):  # folds of these lines (a stale one would hide the wrong lines)
            is_open = f.key in opened
            blocks.append(Block(f.start, f.end, not is_open, layer_fold_line(f, is_open), f.key))
    return FoldedLines(lines, sorted(blocks, key=lambda b: b.start))
