"""The signature fold: a pass's ``def`` line(s) and its inputs' metadata comment (30 lines on a
small model, 300+ on a 24-layer one, 567 on a 70B backward) shown as one line, ``34 inputs ▸``,
so the first screen of a trace shows its ops. The one rule for every view: the TUI's trace pane
draws it closed until enter or a click opens it (``▾``), ``thundervis show`` prints it closed
unless ``--signature`` or ``--unfold`` asks for every line.

The block is found by the printer's line kinds (``def``, ``meta``), never by matching text: the
first run of them right after the header lines. A trace printed without shapes has no metadata
comment: its ``def`` lines alone fold, counted as ``signature, N lines``.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .line_kinds import COMMENT, DEF, META, TYPE, PrintedLine
from .units import plural

SIGNATURE = "signature"  # the key a view remembers the block as opened by (a layer fold's: its range)
FOLD = "fold"  # the kind of a fold line (present.trace_folds.FOLD)
_BLOCK = (DEF, META)


def signature_block(lines: Sequence) -> tuple[int, int]:
    """Return ``(start, end)`` of the first run of ``def``/``meta`` lines in ``lines`` (printed
    lines) right after the header, or ``(-1, -1)`` when there is none."""
    for i, ln in enumerate(lines):
        if ln.kind in _BLOCK:
            end = i
            while end < len(lines) and lines[end].kind in _BLOCK:
                end += 1
            return i, end
        if ln.kind != "header":  # the block follows the header: stop at the first op
            break
    return -1, -1


def input_count(block: Sequence) -> Optional[int]:
    """Return the number of inputs the block's ``meta`` lines describe (one ``type`` span per
    input), or None when the block has no metadata comment."""
    metas = [ln for ln in block if ln.kind == META]
    if not metas:
        return None
    return sum(1 for ln in metas for sp in ln.spans if sp[2] == TYPE)


def signature_line(block: Sequence, folded: bool = True) -> PrintedLine:
    """Return the line standing for ``block`` (its printed lines): ``34 inputs ▸`` closed, ``▾``
    open (kind ``fold``, no uid)."""
    n = input_count(block)
    what = plural(n, "input") if n is not None else f"signature, {plural(len(block), 'line')}"
    text = f"  {what} {'▸' if folded else '▾'}"
    return PrintedLine(text, FOLD, None, 0, ((2, len(text), COMMENT),))


def folded_signature(lines: Sequence) -> list:
    """Return ``lines`` (printed lines) with the signature block behind its closed
    :func:`signature_line`, as ``show`` prints them; unchanged when there is no block."""
    start, end = signature_block(lines)
    if start < 0:
        return list(lines)
    return list(lines[:start]) + [signature_line(lines[start:end])] + list(lines[end:])
