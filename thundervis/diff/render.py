"""Renderings of a :class:`TraceDiff`: unified and side by side, for the terminal (Rich objects),
HTML (every string escaped) and plain text (goldens, pipes).

All renderings go through :func:`unified_rows` / :func:`side_rows`, which turn diff rows into
display rows (marker, indentation, text, highlighted spans, note); the back ends only style them.
Given ``folds`` (``thundervis.diff.layer_folds``), the rows a layer fold hides are one ``fold``
row, worded as the trace views word it (``present.trace_folds.fold_line``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from .align import (ADDED, CHANGED, FUSED, MOVED, REMOVED, REPLACED, UNCHANGED, DiffLine, TraceDiff,
                    gc_paused, intraline_spans)
from .lines import is_fusion
from thundervis.safe_text import html_text, visible, visible_line
from thundervis.present.trace_folds import LayerFold, fold_line
from thundervis.present.units import plural

FOLD = "fold"  # status of a row standing for folded unchanged lines

_RICH_STYLE = {UNCHANGED: "", CHANGED: "", ADDED: "green", REMOVED: "red", REPLACED: "yellow",
               FUSED: "magenta", MOVED: "cyan", FOLD: "dim"}
_RICH_HIGHLIGHT = {"-": "bold white on dark_red", "+": "bold white on dark_green"}


@dataclass
class Row:
    """One display row: ``marker`` (`` ``, ``-``, ``+``), the line's ``status``, indentation
    ``depth``, ``text``, differing character ``spans`` and a ``note`` (what became of it)."""

    marker: str
    status: str
    depth: int
    text: str
    spans: list = field(default_factory=list)
    note: str = ""
    source: str = ""  # where the symbol came from (``file.py:12  code  [module]``), for tooltips
    uid: str = ""  # the line's symbol uid (``<inputs>``/``<return>`` for the edges), for views that link lines
    fold: str = ""  # a layer fold's row: its key (``LayerFold.key``), what a view opens it by


def source_text(line) -> str:
    """Return ``file.py:12  code  [module]`` for a diff line's symbol ("" when unknown)."""
    b = line.symbol if line is not None else None
    if b is None or b.source is None:
        return ""
    s = b.source
    return visible_line(f"{s.label()}  {s.code}" + (f"  [{s.module}]" if s.module else ""))


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _uids(lines, n: int = 4) -> str:
    u = [p.uid for p in lines]
    return ", ".join(u[:n]) + (f" (+{len(u) - n})" if len(u) > n else "")


def row_note(d: DiffLine, side: str) -> str:
    """Return the note for diff row ``d`` shown on ``side`` (``a`` or ``b``)."""
    if d.status == FUSED:
        return f"→ fused into {d.kernel}" if side == "a" else ""
    if d.status == REPLACED:
        p = d.partners
        if d.how == "flattened":
            return f"→ flattened into its {len(p)} prim{'s' if len(p) != 1 else ''}"
        if d.how == "merged":
            return f"→ merged into {p[0].uid}: {_short(p[0].text)}"
        if len(p) == 1:
            return f"→ replaced by {p[0].uid}: {_short(p[0].text)}"
        return f"→ replaced by {plural(len(p), 'line')}: {_uids(p)}"
    if d.status == MOVED:
        return "moved from here" if side == "a" else "moved here"
    if d.status == ADDED and d.partners and d.b is not None:
        if is_fusion(d.b.symbol):
            return f"fuses {plural(len(d.partners), 'op')}: {_uids(d.partners)}"
        if d.b.depth == 0:
            return f"from {_uids(d.partners)}"
    return ""


def shown_lines(diff: TraceDiff, folds: Sequence = (), opened: frozenset = frozenset()):
    """Yield the rows of ``diff`` a view shows with the layer folds ``folds`` closed
    (``thundervis.diff.layer_folds.diff_folds``, in row order): each ``DiffLine``, and each fold
    (a ``LayerFold``) in place of the rows it hides; a fold whose key is in ``opened`` is
    followed by its rows (its row stays, so the same row closes it again)."""
    at = 0
    for f in folds:
        yield from diff.lines[at:f.start]
        yield f
        at = f.start if f.key in opened else f.end
    yield from diff.lines[at:]


def layer_fold_text(fold: LayerFold, opened: bool = False) -> str:
    """Return the text of the row standing for a layer fold: ``▸ model.layers.2–23 × 22 more: …``
    (``▾`` when ``opened``; its block path is recorded text: control characters made visible,
    for every back end)."""
    return visible_line(fold_line(fold, opened).text.strip())


def unified_rows(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = (),
                 opened: frozenset = frozenset()) -> list[Row]:
    """Return the unified display rows of ``diff``; with ``context`` set, runs of unchanged rows
    farther than ``context`` rows from a change fold into one ``fold`` row. The layer folds
    ``folds`` are closed but those whose key is in ``opened`` (:func:`shown_lines`)."""
    with gc_paused():
        return _unified_rows(diff, context, folds, opened)


def _unified_rows(diff: TraceDiff, context: Optional[int], folds: Sequence, opened: frozenset) -> list[Row]:
    rows: list[Row] = []
    for d in shown_lines(diff, folds, opened):
        if isinstance(d, LayerFold):
            rows.append(Row("@", FOLD, 0, layer_fold_text(d, d.key in opened), fold=d.key))
        elif d.status == UNCHANGED:
            rows.append(Row(" ", UNCHANGED, d.b.depth, d.b.text, source=source_text(d.b), uid=d.b.uid))
        elif d.status == CHANGED:
            sa, sb = intraline_spans(d.a.text, d.b.text)
            rows.append(Row("-", CHANGED, d.a.depth, d.a.text, sa, source=source_text(d.a), uid=d.a.uid))
            rows.append(Row("+", CHANGED, d.b.depth, d.b.text, sb, source=source_text(d.b), uid=d.b.uid))
        elif d.a is not None:
            # before-side rows (a fused-into row keeps the after-side member only for reference)
            rows.append(Row("-", d.status, d.a.depth, d.a.text, note=row_note(d, "a"), source=source_text(d.a), uid=d.a.uid))
        else:
            rows.append(Row("+", d.status, d.b.depth, d.b.text, note=row_note(d, "b"), source=source_text(d.b), uid=d.b.uid))
    return _fold(rows, context, _unified_fold_row) if context is not None else rows


def fold_runs(rows: list, context: int) -> list:
    """Return ``rows`` with each run of unchanged rows further than ``context`` from a change
    replaced by a list of that run's rows (the one folding rule: the text renderings show a fold
    row instead, the widget a fold the user can open)."""
    near = [False] * len(rows)
    for k, r in enumerate(rows):
        if r.status == FOLD:  # a layer fold stays, without context: it is not a change
            near[k] = True
        elif r.status != UNCHANGED:
            for m in range(max(0, k - context), min(len(rows), k + context + 1)):
                near[m] = True
    out: list = []
    run: list = []
    for k, r in enumerate(rows):
        if near[k]:
            if run:
                out.append(run)
                run = []
            out.append(r)
        else:
            run.append(r)
    if run:
        out.append(run)
    return out


def _fold(rows: list, context: int, fold_row: Callable[[int], object]) -> list:
    """Return ``rows`` with each run of unchanged rows further than ``context`` from a change
    replaced by ``fold_row(length of the run)``."""
    return [fold_row(len(x)) if isinstance(x, list) else x for x in fold_runs(rows, context)]


def _unified_fold_row(run: int) -> Row:
    return Row("@", FOLD, 0, f"… {run} unchanged line{'s' if run != 1 else ''} …")


def unified_plain(diff: TraceDiff, context: Optional[int] = None, width: int = 64, *, folds: Sequence = ()) -> str:
    """Return the unified diff as plain text (notes aligned at column ``width``)."""
    out = [f"--- {diff.before}", f"+++ {diff.after}"]
    for r in unified_rows(diff, context, folds=folds):
        line = f"{r.marker} {'  ' * r.depth}{r.text}"
        if r.note:
            line = line.ljust(width) + "  " + r.note
        out.append(line.rstrip())
    return "\n".join(out) + "\n"


def _rich_text(text: str, spans, base: str, marker: str):
    from rich.text import Text
    t = Text(text, style=base)
    for s, e in spans:
        t.stylize(_RICH_HIGHLIGHT.get(marker, "reverse"), s, e)
    return t


def unified_rich(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = ()):
    """Return the unified diff as a ``rich.text.Text`` (one line per row, changes highlighted)."""
    from rich.text import Text
    out = Text()
    out.append(f"--- {diff.before}\n", style="bold red")
    out.append(f"+++ {diff.after}\n", style="bold green")
    for r in unified_rows(diff, context, folds=folds):
        base = _RICH_STYLE.get(r.status, "")
        if r.status == CHANGED:
            base = "red" if r.marker == "-" else "green"
        out.append(f"{r.marker} {'  ' * r.depth}", style=base)
        out.append(_rich_text(r.text, r.spans, base, r.marker))
        if r.note:
            out.append(f"   {r.note}", style="dim italic " + base)
        out.append("\n")
    return out


@dataclass
class SideRow:
    """One side-by-side row: the before cell, the after cell (either may be empty) and a note."""

    status: str
    left: Optional[Row]
    right: Optional[Row]
    note: str = ""
    fold: str = ""  # a layer fold's row: its key (``LayerFold.key``)


def side_rows(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = (),
              opened: frozenset = frozenset()) -> list[SideRow]:
    """Return the side-by-side rows of ``diff`` (pairs on one row; one-sided rows half empty),
    the layer folds ``folds`` closed but those whose key is in ``opened``."""
    out: list[SideRow] = []
    for d in shown_lines(diff, folds, opened):
        if isinstance(d, LayerFold):
            out.append(SideRow(FOLD, None, None, layer_fold_text(d, d.key in opened), fold=d.key))
        elif d.status in (UNCHANGED, CHANGED) and d.a is not None and d.b is not None:
            sa, sb = intraline_spans(d.a.text, d.b.text) if d.status == CHANGED else ([], [])
            out.append(SideRow(d.status, Row(" ", d.status, d.a.depth, d.a.text, sa, source=source_text(d.a), uid=d.a.uid),
                               Row(" ", d.status, d.b.depth, d.b.text, sb, source=source_text(d.b), uid=d.b.uid)))
        elif d.a is not None:
            note = row_note(d, "a")
            out.append(SideRow(d.status, Row("-", d.status, d.a.depth, d.a.text, note=note,
                                             source=source_text(d.a), uid=d.a.uid), None, note))
        else:
            note = row_note(d, "b")
            out.append(SideRow(d.status, None, Row("+", d.status, d.b.depth, d.b.text, note=note,
                                                   source=source_text(d.b), uid=d.b.uid), note))
    if context is None:
        return out
    return _fold(out, context, lambda run: SideRow(FOLD, None, None, f"… {run} unchanged …"))


def side_by_side_rich(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = ()):
    """Return the side-by-side diff as a ``rich.table.Table`` (before | after | note)."""
    from rich.table import Table
    from rich.text import Text
    table = Table(show_header=True, header_style="bold", box=None, expand=True, pad_edge=False)
    # Headers and notes quote recorded pass names and notes: Text, never markup.
    table.add_column(Text(visible_line(diff.before)), ratio=5, overflow="fold")
    table.add_column(Text(visible_line(diff.after)), ratio=5, overflow="fold")
    table.add_column("", ratio=3, overflow="fold", style="dim italic")

    for s in side_rows(diff, context, folds=folds):
        if s.status == FOLD:
            table.add_row(Text(s.note, style="dim"), Text(s.note, style="dim"), "")
            continue
        table.add_row(_rich_cell(s.left, "-"), _rich_cell(s.right, "+"), Text(visible(s.note or "")))
    return table


def _rich_cell(r: Optional[Row], marker: str):
    """Return one side of a diff row as rich Text (indented, styled by status; ``marker`` ``-`` or
    ``+`` says which side a changed row is on)."""
    from rich.text import Text
    if r is None:
        return Text("")
    base = _RICH_STYLE.get(r.status, "")
    if r.status == CHANGED:
        base = "red" if marker == "-" else "green"
    t = Text("  " * r.depth, style=base)
    t.append(_rich_text(r.text, r.spans, base, marker))
    return t


def _folded(t, width: int) -> list:
    """Split the rich Text ``t`` into lines of at most ``width`` characters (one list item each)."""
    n = len(t.plain)
    if n <= width:
        return [t]
    return list(t.divide(range(width, n, width)))


def side_by_side_text(diff: TraceDiff, context: Optional[int] = None, width: int = 160, *, folds: Sequence = ()):
    """Return the side-by-side diff as one ``rich.text.Text``: before | after | note in columns of
    fixed widths (5 : 5 : 3 of ``width``), long cells folded onto more lines, styled like
    :func:`side_by_side_rich`. Linear in the number of rows (a Rich Table measures every cell of
    every row first: minutes for a 100k-op pass); what the CLI prints."""
    from rich.text import Text
    usable = max(39, width - 4)
    wa = usable * 5 // 13
    widths = (wa, wa, usable - 2 * wa)

    out = Text(no_wrap=True, overflow="ignore")

    def emit(cells) -> None:
        parts = [_folded(c, w) for c, w in zip(cells, widths)]
        for i in range(max(len(p) for p in parts)):
            for k, (p, w) in enumerate(zip(parts, widths)):
                piece = p[i] if i < len(p) else Text("")
                if k < 2 or i < len(p):
                    out.append(piece)
                if k < 2:
                    out.append(" " * (w - len(piece.plain) + 2))
            out.append("\n")

    emit((Text(visible_line(diff.before), style="bold"), Text(visible_line(diff.after), style="bold"), Text("")))
    for s in side_rows(diff, context, folds=folds):
        if s.status == FOLD:
            emit((Text(s.note, style="dim"), Text(s.note, style="dim"), Text("")))
            continue
        emit((_rich_cell(s.left, "-"), _rich_cell(s.right, "+"), Text(visible(s.note or ""), style="dim italic")))
    return out


def side_by_side_plain(diff: TraceDiff, context: Optional[int] = None, width: int = 200, *, folds: Sequence = ()) -> str:
    """Return the side-by-side diff as plain text laid out like :func:`side_by_side_text`
    (before | after | note, long cells folded), control characters made visible; linear in size."""
    usable = max(39, width - 4)
    wa = usable * 5 // 13
    widths = (wa, wa, usable - 2 * wa)
    out: list[str] = []

    def emit(cells) -> None:
        parts = [[c[i:i + w] for i in range(0, len(c), w)] or [""] for c, w in zip(cells, widths)]
        for i in range(max(len(p) for p in parts)):
            line = "".join((p[i] if i < len(p) else "").ljust(w + 2) for p, w in zip(parts[:2], widths))
            line += parts[2][i] if i < len(parts[2]) else ""
            out.append(line.rstrip())

    def cell(r: Optional[Row]) -> str:
        return "" if r is None else visible("  " * r.depth + r.text)

    emit((visible_line(diff.before), visible_line(diff.after), ""))
    for s in side_rows(diff, context, folds=folds):
        if s.status == FOLD:
            emit((s.note, s.note, ""))
        else:
            emit((cell(s.left), cell(s.right), visible(s.note or "")))
    return "\n".join(out) + "\n"


HTML_STYLE = """
.tv-diff { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; border-collapse: collapse; }
.tv-diff td { padding: 0 6px; white-space: pre; vertical-align: top; }
.tv-diff .m { color: #888; user-select: none; }
.tv-diff .note { color: #777; font-style: italic; }
.tv-diff .removed, .tv-diff .changed-a { background: #ffecec; }
.tv-diff .added, .tv-diff .changed-b { background: #eaffea; }
.tv-diff .replaced-by { background: #fff8dc; }
.tv-diff .fused-into { background: #f6e8ff; }
.tv-diff .moved { background: #e6f6ff; }
.tv-diff .fold { color: #999; text-align: center; }
.tv-diff .hl-a { background: #f5a3a3; }
.tv-diff .hl-b { background: #9be59b; }
.tv-diff th { text-align: left; border-bottom: 1px solid #ccc; }
"""


def _html_text(text: str, spans, cls: str) -> str:
    parts, pos = [], 0
    for s, e in spans:
        parts.append(html_text(text[pos:s]))
        parts.append(f'<span class="{cls}">{html_text(text[s:e])}</span>')
        pos = e
    parts.append(html_text(text[pos:]))
    return "".join(parts)


def _row_class(r: Row) -> str:
    if r.status == CHANGED:
        return "changed-a" if r.marker == "-" else "changed-b"
    return r.status.replace(" ", "-")


def unified_html(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = ()) -> str:
    """Return the unified diff as an HTML ``<table class="tv-diff">`` fragment (all text escaped)."""
    out = ['<table class="tv-diff unified">',
           f'<tr><th colspan="3">--- {html_text(diff.before)}<br>+++ {html_text(diff.after)}</th></tr>']
    for r in unified_rows(diff, context, folds=folds):
        if r.status == FOLD:
            out.append(f'<tr class="fold"><td colspan="3">{html_text(r.text)}</td></tr>')
            continue
        hl = "hl-a" if r.marker == "-" else "hl-b"
        out.append(f'<tr class="{_row_class(r)}" title="{html_text(r.source)}"><td class="m">{html_text(r.marker)}</td>'
                   f'<td>{"  " * r.depth}{_html_text(r.text, r.spans, hl)}</td>'
                   f'<td class="note">{html_text(r.note)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def side_by_side_html(diff: TraceDiff, context: Optional[int] = None, *, folds: Sequence = ()) -> str:
    """Return the side-by-side diff as an HTML ``<table class="tv-diff">`` fragment (escaped)."""
    out = ['<table class="tv-diff side-by-side">',
           f'<tr><th>{html_text(diff.before)}</th><th>{html_text(diff.after)}</th><th></th></tr>']

    def cell(r: Optional[Row], hl: str) -> str:
        if r is None:
            return "<td></td>"
        cls = "changed-a" if (r.status == CHANGED and hl == "hl-a") else \
            "changed-b" if r.status == CHANGED else r.status
        return (f'<td class="{cls}" title="{html_text(r.source)}">{"  " * r.depth}'
                f'{_html_text(r.text, r.spans, hl)}</td>')

    for s in side_rows(diff, context, folds=folds):
        if s.status == FOLD:
            out.append(f'<tr class="fold"><td colspan="3">{html_text(s.note)}</td></tr>')
            continue
        out.append(f"<tr>{cell(s.left, 'hl-a')}{cell(s.right, 'hl-b')}"
                   f'<td class="note">{html_text(s.note)}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def html_page(body: str, title: str) -> str:
    """Return a standalone HTML document with the diff stylesheet around ``body`` (``title`` is
    escaped here; ``body`` must already be escaped HTML)."""
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html_text(title)}</title>"
            f"<style>{HTML_STYLE}</style></head><body>\n<h3>{html_text(title)}</h3>\n{body}\n</body></html>\n")
