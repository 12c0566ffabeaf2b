"""The numerics screens: kernels by verdict (``run --check-numerics``), and a chain's bisect.

:class:`NumericsScreen` lists every kernel with its verdict, error against float64, eager's error
and the ratio, worst first (rows from ``thundervis.present.numerics``); enter opens the kernel and
its chain's bisect (:class:`BisectScreen`, computed in a worker: it runs every pass). Recorded
strings are shown as ``Text`` through ``safe_text.visible_line``, never as markup.
"""
from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from thundervis.present.numerics import (NumericsRow, NumericsSummary, eager_line, fmt_ratio, header,
                                         ran_width, row_line, verdict_cell)
from thundervis.present.units import format_error, plural
from thundervis.safe_text import visible_line

from . import panels
from .base_screen import DetailScreen, detail_bindings
from .requests import OpenKernels

VERDICT_STYLE = {"flagged": Style(color="#e06c75", bold=True), "error": Style(color="#e5c07b", bold=True),
                 "ok": Style(color="#98c379"), "skipped": Style(dim=True), "not checked": Style(dim=True)}
COLUMNS = ("verdict", "kernel", "chain", "max rel", "eager rel", "ratio", "ran", "detail")


def verdict_text(row: Optional[NumericsRow]) -> Text:
    """The verdict cell of a kernel (``-`` when the run was not checked)."""
    cell = verdict_cell(row)
    return Text(cell["text"], style=VERDICT_STYLE.get(cell["verdict"], Style(dim=True)))


def trace_marks(summary: Optional[NumericsSummary], graph: int, chain: str) -> dict:
    """Return ``{fusion uid: (mark, style)}`` for the checked kernels of one chain: the marker a
    trace line of that fusion gets."""
    if summary is None:
        return {}
    out = {}
    for r in summary.rows:
        if r.graph == graph and r.chain == chain and r.uid and r.verdict not in ("not checked", "skipped"):
            out[r.uid] = (r.mark, VERDICT_STYLE.get(r.verdict, Style()))
    return out


class NumericsScreen(DetailScreen):
    """Every kernel by verdict; enter opens the kernel and its bisect."""

    TITLE_ID = "ntitle"
    BINDINGS = detail_bindings("escape,N", Binding("enter", "open", "Kernel + bisect"),
                               Binding("k", "kernel", "Kernels table"))

    def __init__(self, data, overview, summary: Optional[NumericsSummary]):
        super().__init__()
        self.data, self.overview, self.summary = data, overview, summary
        self.rows: list[NumericsRow] = list(summary.by_verdict()) if summary is not None else []

    def compose_body(self) -> ComposeResult:
        """The verdict table and the eager-error foot."""
        yield DataTable(id="ntable", cursor_type="row", zebra_stripes=True)
        yield Static(id="nfoot")

    def on_mount(self) -> None:
        """Fill the table and focus it."""
        table = self.query_one(DataTable)
        for c in COLUMNS:
            table.add_column(c, key=c)
        for i, r in enumerate(self.rows):
            table.add_row(verdict_text(r), Text(visible_line(r.kernel), style=panels.styling.S_FUSION),
                          *(Text(visible_line(c)) for c in (  # str cells would be read as markup
                              f"g{r.graph} {r.chain}", format_error(r.max_rel), format_error(r.eager_rel),
                              fmt_ratio(r.ratio), r.ran_text, r.detail[:120])), key=str(i))
        s = self.summary
        if s is None or not s.checked:
            title = "numerics · not checked (record with thundervis run --check-numerics)"
        else:
            title = f"numerics · {plural(s.checked, 'kernel')} checked against float64 · {s.flagged} flagged"
        self.set_title(Text(title, style=Style(bold=True)))
        foot = Text()
        for e in (s.eager if s is not None else ()):
            foot.append(visible_line(eager_line(e)) + "\n")
        foot.append("enter: the kernel and its chain's bisect · k: the kernels table", style=Style(dim=True))
        self.query_one("#nfoot", Static).update(foot)
        table.focus()

    def selected(self) -> Optional[NumericsRow]:
        """The row under the cursor."""
        table = self.query_one(DataTable)
        if not self.rows or table.row_count == 0:
            return None
        return self.rows[min(max(table.cursor_row, 0), len(self.rows) - 1)]

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        """Open the selected kernel and its chain's bisect."""
        r = self.selected()
        if r is not None:
            self.app.push_screen(BisectScreen(self.data, r.graph, r.chain, r))

    def action_kernel(self) -> None:
        """Open the kernels table on the selected kernel."""
        r = self.selected()
        self.app.post_message(OpenKernels(r.kernel_id if r is not None else None))


class BisectScreen(DetailScreen):
    """One chain's bisect (every pass on the same inputs), computed in a worker; with the kernel
    it was opened from, that kernel's numerics on top."""

    TITLE_ID = "btitle"
    BINDINGS = detail_bindings("escape,q", Binding("k", "kernel", "Kernels table"),
                               Binding("r", "random", "Random inputs"), help_key=False)

    def __init__(self, data, graph: int, chain: str, row: Optional[NumericsRow] = None):
        super().__init__()
        self.data, self.graph, self.chain, self.row = data, graph, chain, row

    def compose_body(self) -> ComposeResult:
        """The kernel's numerics and the bisect report, scrolling together."""
        with VerticalScroll(id="bbody"):
            yield Static(id="bkernel")
            yield Static(id="bresult")

    def on_mount(self) -> None:
        """Show the kernel and start the bisect."""
        self.set_title(Text(f"bisect · graph {self.graph} {visible_line(self.chain)}", style=Style(bold=True)))
        if self.row is not None:
            width = ran_width([self.row])
            t = Text(header(width) + "\n", style=Style(dim=True))
            t.append(visible_line(row_line(self.row, width)) + "\n", style=VERDICT_STYLE.get(self.row.verdict, Style()))
            if self.row.sources:
                t.append("lines " + visible_line(", ".join(self.row.sources[:6])) + "\n", style=Style(dim=True))
            self.query_one("#bkernel", Static).update(t)
        self.start(None)

    def start(self, inputs: Optional[str]) -> None:
        """(Re)run the bisect with ``inputs`` (None: captured when recorded)."""
        self.query_one("#bresult", Static).update(Text("running every pass of the chain on the same inputs …",
                                                       style=Style(dim=True)))
        self.run_bisect(inputs)

    @work(thread=True, exclusive=True, group="bisect")
    def run_bisect(self, inputs: Optional[str]) -> None:
        """Worker: bisect the chain and show the report."""
        lines, error = self.data.bisect(self.graph, self.chain, inputs)
        self.app.call_from_thread(self._show, lines, error)

    def _show(self, lines: list, error: Optional[str]) -> None:
        t = Text()
        if error:
            t.append(visible_line(error) + "\n", style=Style(color=panels.WARN, bold=True))
        for ln in lines:
            style = Style(color="#e06c75", bold=True) if "diverge" in ln else \
                Style(color="#98c379", bold=True) if ln == "no divergence" else Style()
            t.append(visible_line(ln) + "\n", style=style)
        self.query_one("#bresult", Static).update(t)

    def action_random(self) -> None:
        """Bisect again with random inputs of the recorded shapes."""
        self.start("random")

    def action_kernel(self) -> None:
        """Open the kernels table on the kernel this screen was opened from."""
        self.app.post_message(OpenKernels(self.row.kernel_id if self.row is not None else None))
