"""The memory screen (``M``): what a training step keeps alive, from ``thundervis.present.memory``.

The totals and the peak with where it is, the step's static timeline as a sparkline (Textual's
``Sparkline`` draws it: forward then backward, one bar per symbol) and the saved tensors largest
first with the line and module that made them and why they are saved. A recording made before the
ledger says so. Recorded strings are shown as ``Text`` through ``safe_text.visible_line``.
"""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Sparkline, Static

from thundervis.present.memory import MemoryReport, line_label, timeline_points
from thundervis.present.units import format_bytes
from thundervis.safe_text import visible_line

from .base_screen import DetailScreen, detail_bindings
from .layout import memory_rows

COLUMNS = ("bytes", "tensor", "shape", "kind", "made by", "line", "module", "why")


def summary_text(report: MemoryReport) -> Text:
    """The lines above the plot: totals, the peak and where, the bytes each remat policy keeps."""
    if not report.recorded:
        return Text(f"memory: {report.message}")
    t = Text()
    t.append(f"saved for backward {format_bytes(report.saved_bytes)} in {report.saved_tensors} storages "
             f"(remat {visible_line(report.policy)}) · parameters {format_bytes(report.parameters)} · "
             f"gradients {format_bytes(report.gradients)}\n")
    t.append(f"static peak {format_bytes(report.peak_bytes)} {visible_line(report.peak_where)}\n")
    t.append(" · ".join(f"remat {p}: {format_bytes(b)}" for p, b in report.what_if.items()), style=Style(dim=True))
    return t


class MemoryScreen(DetailScreen):
    """Totals, the timeline plot and the saved tensors of one recording."""

    TITLE_ID = "mtitle"
    BINDINGS = detail_bindings("escape,M")

    def __init__(self, report: MemoryReport):
        super().__init__()
        self.report = report

    def compose_body(self) -> ComposeResult:
        """The summary, the timeline sparkline and the saved tensors table."""
        yield Static(id="msummary")
        yield Sparkline([b for _, b in timeline_points(self.report)] or [0], id="mplot")
        yield DataTable(id="mtable", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        """Fill the summary and the table."""
        r = self.report
        n = len(timeline_points(r))
        self.set_title(Text(f"memory · live bytes over the step ({n} symbols, forward then backward)"
                            if r.recorded else "memory", style=Style(bold=True)))
        self.query_one("#msummary", Static).update(summary_text(r))
        table = self.query_one(DataTable)
        for c in COLUMNS:
            table.add_column(c, key=c)
        for i, s in enumerate(x for x in r.saved if x.counted):
            shape = "×".join(str(d) for d in s.shape) or "scalar"
            table.add_row(*(Text(visible_line(c)) for c in (  # str cells would be read as markup
                format_bytes(s.storage_bytes), s.name, f"{s.dtype}[{shape}]", s.kind, s.op or s.producer,
                line_label(s.file, s.line), s.module, s.why[:100])), key=str(i))
        table.focus()
        self.fit_rows()

    def on_resize(self, event) -> None:
        """Share the new height again (layout.memory_rows)."""
        self.fit_rows()

    def fit_rows(self) -> None:
        """Size the summary, the plot and the table so the totals and the peak stay on screen and
        the table scrolls in the rest (layout.memory_rows)."""
        lines = [len(x) for x in summary_text(self.report).plain.split("\n")]
        text, plot, table = memory_rows(self.size.height, self.size.width, lines)
        self.query_one("#msummary", Static).styles.height = text
        spark = self.query_one("#mplot", Sparkline)
        spark.styles.height = plot
        spark.display = plot > 0
        self.query_one(DataTable).styles.height = table
