"""How the main view's rows are shared on a small terminal, and where a jump scrolls the trace to, as
pure functions of sizes (the app and its widgets apply what these return; tests call them alone).

On a narrow terminal the panes stack: the top bar, the banner, the chain and pass band, the trace's
title and lines, the details, the footer. The trace keeps at least :data:`MIN_TRACE_ROWS` rows: the
details take what is left above that (first from the pass band, down to its least height), never
the trace's own rows. The memory screen shares its rows the same way (:func:`memory_rows`), and a
trace line too long for the view keeps its note on screen (:func:`note_column`)."""
from __future__ import annotations

from typing import Optional

NARROW = 110  # below this many columns the details pane goes under the trace
NARROW_PASS_ROWS = 4  # the pass band's least height on a narrow terminal ...
PASS_ROWS = 9  # ... and the passes it always has room for (a compiled chain's)
MIN_TRACE_ROWS = 8  # the trace's lines never get fewer rows than this for the details' sake
DETAILS_ROWS = 10  # the details pane's height under the trace (its border included) when room allows
LEAST_DETAILS_ROWS = 3  # a border and two lines: below this the details pane is not worth showing
_CHROME = 2 + 1  # the top bar and the footer, and the trace's title line


def narrow_rows(height: int, passes: int, *, short: bool, details: bool, banner: int = 0,
                want: int = DETAILS_ROWS) -> tuple[int, int]:
    """Return (pass band rows, details rows) for a narrow terminal ``height`` rows tall whose chain
    has ``passes`` passes shown. ``short``: the band has no bottom border; ``details``: the details
    pane is shown under the trace (0 rows when not, or when it cannot fit beside
    :data:`MIN_TRACE_ROWS` trace rows), ``want`` rows when there is room; ``banner``: rows the
    run's banner takes."""
    border = 0 if short else 1
    band = min(max(NARROW_PASS_ROWS, passes), max(PASS_ROWS, height // 3)) + border
    if not details:
        return band, 0
    spare = height - _CHROME - banner - MIN_TRACE_ROWS  # what the band and the details share
    if spare - band < want:  # the band gives up rows first, down to its least height
        band = max(NARROW_PASS_ROWS + border, min(band, spare - want))
    rows = min(want, spare - band)
    return band, rows if rows >= LEAST_DETAILS_ROWS else 0


def jump_top(index: int, top: int, height: int, count: int) -> int:
    """Return the trace's scroll offset after a jump (a search hit, a symbol picked elsewhere) to
    line ``index`` of ``count`` lines, shown ``height`` rows from offset ``top``: unchanged when the
    line and the one above it (its source comment) are both on screen, else the line a third of
    the way down, so the lines that say where it comes from show above it."""
    height = max(1, height)
    if top < index < top + height or (index == top == 0):
        return top
    above = max(1, height // 3) if height > 1 else 0
    return max(0, min(index - above, count - height))


def kept_top(cursor: int, top: int, height: int) -> int:
    """Return the scroll offset that keeps line ``cursor`` on screen after the view's height
    changed to ``height`` rows (unchanged when it still shows)."""
    height = max(1, height)
    if cursor < top:
        return cursor
    if cursor >= top + height:
        return cursor - height + 1
    return top


MEMORY_PLOT_ROWS = 6  # the memory screen's sparkline when there is room ...
LEAST_PLOT_ROWS = 2  # ... and the least worth drawing (below it the plot goes)
MIN_MEMORY_TABLE_ROWS = 5  # the saved tensors' header and four rows, which then scroll
MEMORY_KEPT_LINES = 2  # the summary's totals line and its peak line stay on any screen


def memory_rows(height: int, width: int, summary: list[int]) -> tuple[int, int, int]:
    """Return (summary rows, plot rows, table rows) for the memory screen ``height`` rows tall and
    ``width`` columns wide, whose summary has lines ``summary`` characters long (padded one column
    each side, wrapped). The table keeps :data:`MIN_MEMORY_TABLE_ROWS` rows and scrolls: the plot
    gives up rows first (down to :data:`LEAST_PLOT_ROWS`), then the summary's lines after its totals
    and peak, then the plot the rest; the totals and peak are never cut, so on a tiny terminal the
    table gets what is left."""
    cols = max(1, width - 2)
    wrapped = [max(1, -(-n // cols)) for n in summary]
    room = max(0, height - 2)  # the title line and the footer
    kept = sum(wrapped[:MEMORY_KEPT_LINES])
    text = sum(wrapped)
    if room - text - LEAST_PLOT_ROWS < MIN_MEMORY_TABLE_ROWS:  # the what-if lines go before the plot does
        text = kept
    plot = min(MEMORY_PLOT_ROWS, room - text - MIN_MEMORY_TABLE_ROWS)
    plot = plot if plot >= LEAST_PLOT_ROWS else 0
    text = min(text, room)
    return text, plot, max(0, room - text - plot)


NOTE_LEAD = "… # "  # what stands before a note drawn at the view's right edge


def note_column(length: int, note: tuple[int, int], width: int, scroll_x: int) -> Optional[int]:
    """Return the view column where a trace line's note (``ran on cpu via torch``: characters
    ``note[0]:note[1]`` of a line ``length`` long, after its ``# ``) is drawn over the line's text,
    pinned to the right edge with :data:`NOTE_LEAD` before it, for a view ``width`` columns wide
    scrolled ``scroll_x`` columns right; None when the note shows where it is (it fits, or the user
    scrolled to it) or the view is too narrow to keep half of the line's code beside it."""
    start, end = note
    if end > length or start >= end:
        return None
    if scroll_x <= start - 2 and end <= scroll_x + width:
        return None
    col = width - len(NOTE_LEAD) - (end - start)
    return col if col >= width // 2 else None
