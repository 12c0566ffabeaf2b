"""The TUI's other screens: kernels (table, detail, re-run, repro), search, pass picker, run
information (with the traceback of a failed or killed run) and help."""
from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from thundervis.safe_text import visible, visible_line

from . import panels
from .base_screen import DetailScreen, detail_bindings
from thundervis.present.kernel_folds import folded_table
from thundervis.present.kernel_rows import KernelRow
from thundervis.present.overview import ViewOverview
from thundervis.recording import chain_position
from thundervis.present.units import format_gbps, format_pct, format_roofline_us, format_share, format_us

from .data import DataError, SearchHit
from .numerics_screen import verdict_text

SORT_KEYS = {
    "kernel": lambda k: (k.name, k.graph, k.chain),
    "executor": lambda k: (k.executor, k.name),
    "chain": lambda k: (k.graph, chain_position(k.chain), k.chain, k.id),
    "ops": lambda k: -k.n_ops,
    "calls": lambda k: -(k.calls or 0),
    "median": lambda k: -(k.median_us or 0.0),
    "roofline µs": lambda k: -(k.roofline_us or 0.0),
    "% roof": lambda k: -(k.pct_of_roofline or 0.0),
    "share": lambda k: -(k.share or 0.0),
    "GB/s": lambda k: -(k.gbps or 0.0),
    "sources": lambda k: (k.source_lines[:1], k.id),
}
COLUMNS = tuple(SORT_KEYS)
NUMERICS_COLUMN = "numerics"  # shown when the run was checked (run --check-numerics); sorts by verdict


def timing_clocks(kernels) -> list[str]:
    """Return the clocks (``CPU``, ``GPU``) that measured the timed ``kernels`` (``KernelRow``), sorted."""
    return sorted({k.clock for k in kernels if k.median_us is not None and k.clock})


class KernelsScreen(DetailScreen):
    """Every kernel in a sortable table; the selected one's members, code and re-runs below."""

    TITLE_ID = "ktitle"
    BINDINGS = detail_bindings("escape,k", Binding("s", "cycle_sort", "Sort"), Binding("r", "rerun", "Re-run"),
                               Binding("R", "repro", "Repro script"), Binding("a", "asm", "Asm"),
                               Binding("enter", "open", "Open", show=False))

    def __init__(self, data, overview: ViewOverview, focus_kernel: Optional[int] = None):
        super().__init__()
        self.data = data
        self.overview = overview
        self.roofline_loaded = False
        self.sort = "median" if any(k.median_us is not None for k in overview.kernels) else "chain"
        self.focus_kernel = focus_kernel
        self.kernels: list[KernelRow] = []
        self.last_rerun: dict[int, Text] = {}
        self.busy = False
        self.checked = False
        self.folds: tuple = ()  # present.kernel_folds: a repeated layer's kernels show as one row

    def compose_body(self) -> ComposeResult:
        """The kernels table, the re-run progress and the selected kernel's detail."""
        yield DataTable(id="ktable", cursor_type="row", zebra_stripes=True)
        yield ProgressBar(id="kprogress", show_eta=False)
        with VerticalScroll(id="kdetail"):
            yield Static(id="kinfo")
            yield Static(id="krerun")
            yield Static(id="kcode")

    def on_mount(self) -> None:
        """Fill the screen and focus its main widget."""
        table = self.query_one(DataTable)
        self.checked = self.overview.numerics is not None and self.overview.numerics.checked > 0
        try:
            self.folds = self.data.kernel_folds()
        except DataError:  # unreadable kernel rows: every kernel stands alone
            self.folds = ()
        clocks = timing_clocks(self.overview.kernels)
        for c in self._columns():
            # the measured time's column says which clock measured it (never a GPU time a GPU did not measure)
            table.add_column(f"{c} {clocks[0]}" if c == "median" and len(clocks) == 1 else c, key=c)
        self.fill()
        table.focus()
        self.load_roofline()

    def _columns(self) -> tuple:
        """Return the table's column keys: the verdict of a checked run right after the kernel's
        name, where it is seen without scrolling on a narrow terminal."""
        return COLUMNS[:1] + ((NUMERICS_COLUMN,) if self.checked else ()) + COLUMNS[1:]

    @work(thread=True, exclusive=True, group="roofline")
    def load_roofline(self) -> None:
        """Worker: model every kernel on the run's target (reads the final traces) and show it."""
        try:
            roofline, target = self.data.roofline()
        except DataError:
            roofline, target = {}, None
        self.app.call_from_thread(self._set_roofline, roofline, target)

    def _set_roofline(self, roofline: dict, target: Optional[str]) -> None:
        from thundervis.present.overview import with_roofline
        self.overview = with_roofline(self.overview, roofline, target)
        self.roofline_loaded = True
        self.fill()

    def fill(self) -> None:
        """(Re)fill the table in the current sort order, keeping the selected kernel."""
        table = self.query_one(DataTable)
        current = self.selected()
        keep = current.id if current is not None else self.focus_kernel
        numerics = self.overview.numerics
        check = (lambda k: numerics.verdict_of(k.graph, k.chain, k.name)) if numerics is not None else (lambda k: None)
        if self.sort == NUMERICS_COLUMN:
            from thundervis.present.numerics import VERDICT_ORDER
            key = lambda k: (VERDICT_ORDER.index(check(k).verdict) if check(k) else 9, k.id)  # noqa: E731
        else:
            key = SORT_KEYS[self.sort]
        # a folded row is its first instance's (Enter opens that kernel), its times summed over all
        self.kernels = sorted(folded_table(self.overview.kernels, self.folds), key=key)
        clocks = timing_clocks(self.kernels)
        table.clear()
        for k in self.kernels:
            name = Text(visible_line(k.fold.label if k.fold is not None else k.name), style=panels.styling.S_FUSION)
            if k.fallback:
                name.append(f" ⚠ {k.status}", style=Style(color=panels.WARN))  # present's status word
            # A str cell is read as markup by DataTable: every cell is a Text (recorded strings).
            verdict = (verdict_text(check(k)),) if self.checked else ()
            table.add_row(name, *verdict, *(Text(visible_line(c)) for c in (
                k.tag, f"g{k.graph} {k.chain}", str(k.n_ops),
                "-" if k.calls is None else str(k.calls),
                format_us(k.median_us) + (f" {k.clock}" if k.clock and len(clocks) > 1 else ""),
                format_roofline_us(k.roofline_us),
                format_pct(k.pct_of_roofline), format_share(k.share),
                format_gbps(k.gbps).removesuffix(" GB/s"),
                k.sources_cell)), key=str(k.id))
        n = len(self.kernels)
        timed = (" · " + " and ".join(f"{c} times" for c in clocks)) if clocks else \
            " · not profiled (thundervis run --profile records times)"
        roof = f" · roofline on {self.overview.roofline_target}" if self.overview.roofline_target else \
            ("" if self.roofline_loaded else " · modelling the roofline …")
        title = Text(f"kernels · {n} · sorted by {self.sort}{timed}", style=Style(bold=True))
        title.append(visible_line(roof), style=Style(dim=True))
        self.set_title(title)
        if keep is not None:
            for row, k in enumerate(self.kernels):
                if k.id == keep:
                    table.move_cursor(row=row)
                    break
        self.show_detail()

    def selected(self) -> Optional[KernelRow]:
        """Return the kernel under the table cursor."""
        table = self.query_one(DataTable)
        if not self.kernels or table.row_count == 0:
            return None
        row = min(max(table.cursor_row, 0), len(self.kernels) - 1)
        return self.kernels[row]

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.show_detail()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        self.sort = str(event.column_key.value)
        self.fill()

    def show_detail(self) -> None:
        """Show the selected kernel's summary, stored re-runs and generated code."""
        k = self.selected()
        info, rerun, code = self.query_one("#kinfo", Static), self.query_one("#krerun", Static), \
            self.query_one("#kcode", Static)
        if k is None:
            info.update(Text("no kernels in this recording (was it recorded with a fusion executor?)"))
            rerun.update("")
            code.update("")
            return
        info.update(panels.kernel_summary(k))
        if k.id in self.last_rerun:
            rerun.update(self.last_rerun[k.id])
        else:
            self.load_stored_reruns(k)
        code.update(Text("loading the generated code …", style=Style(dim=True)))
        self.load_code(k)

    @work(thread=True, exclusive=True, group="kernel-code")
    def load_code(self, k: KernelRow) -> None:
        """Worker: load one kernel's generated code (not part of the overview) and show it."""
        try:
            language, source = self.data.kernel_code(k.id)
        except Exception as e:
            shown = Text(f"could not load the code ({visible_line(str(e))})", style=Style(dim=True))
        else:
            if source:
                lexer = "python" if (language or "python") == "python" else "text"
                shown = Syntax(visible(source), lexer, theme="one-dark", line_numbers=True, word_wrap=False)
            else:
                shown = Text("(no generated code recorded)", style=Style(dim=True))
        self.app.call_from_thread(self._set_code, k.id, shown)

    def _set_code(self, kid: int, shown) -> None:
        k = self.selected()
        if k is not None and k.id == kid:
            self.query_one("#kcode", Static).update(shown)

    @work(thread=True, exclusive=True, group="stored-reruns")
    def load_stored_reruns(self, k: KernelRow) -> None:
        """Worker: show the re-runs stored in the recording for ``k``."""
        try:
            rows = self.data.rerun_results(k.id)
        except Exception as e:
            rows, err = [], str(e)
        else:
            err = None
        text = panels.rerun_table(rows[-8:], error=err)
        if rows:
            text = Text("stored re-runs\n", style=panels.HEAD) + text
        else:
            text = Text("press r to re-run this kernel with every executor\n", style=Style(dim=True))
        self.app.call_from_thread(self._set_rerun, k.id, text, False)

    def _set_rerun(self, kid: int, text: Text, remember: bool) -> None:
        if remember:
            self.last_rerun[kid] = text
        k = self.selected()
        if k is not None and k.id == kid:
            self.query_one("#krerun", Static).update(text)

    def action_cycle_sort(self) -> None:
        """Sort by the next column."""
        cols = self._columns()
        self.sort = cols[(cols.index(self.sort) + 1) % len(cols)] if self.sort in cols else cols[0]
        self.fill()

    def action_open(self) -> None:
        """Move focus to the selected kernel's detail (members, code)."""
        self.query_one("#kdetail").focus()

    def action_asm(self) -> None:
        """Open the selected kernel's machine code (stages per GPU target, with line provenance)."""
        from .asm_screen import AsmScreen
        k = self.selected()
        if k is not None:
            self.app.push_screen(AsmScreen(self.data, k))

    def action_rerun(self) -> None:
        """Re-run the selected kernel with every executor, in a worker."""
        k = self.selected()
        if k is None:
            return
        if self.busy:
            self.notify("a re-run is already going", severity="warning")
            return
        self.busy = True
        bar = self.query_one(ProgressBar)
        bar.add_class("-busy")
        bar.update(total=4, progress=0)
        self.query_one("#krerun", Static).update(Text(f"re-running {visible_line(k.name)} …", style=Style(italic=True)))
        self.run_rerun(k)

    @work(thread=True, exclusive=True, group="rerun")
    def run_rerun(self, k: KernelRow) -> None:
        """Worker: the re-run, reporting progress per executor; errors end up on screen."""
        def progress(done: int, total: int, name: str) -> None:
            self.app.call_from_thread(self._progress, done, total, name, k)
        try:
            outcome = self.data.rerun(k, progress=progress)
            text = panels.rerun_table(outcome.rows, outcome.notes, outcome.error)
        except Exception as e:  # never let a re-run take the UI down
            text = panels.rerun_table([], (), f"{type(e).__name__}: {e}")
        self.app.call_from_thread(self._rerun_done, k, text)

    def _progress(self, done: int, total: int, name: str, k: KernelRow) -> None:
        bar = self.query_one(ProgressBar)
        bar.update(total=total, progress=done)
        if name:
            self.query_one("#krerun", Static).update(Text(
                f"re-running {visible_line(k.name)} with {name} ({done + 1}/{total}) …", style=Style(italic=True)))

    def _rerun_done(self, k: KernelRow, text: Text) -> None:
        self.busy = False
        self.query_one(ProgressBar).remove_class("-busy")
        self._set_rerun(k.id, text, True)

    def action_repro(self) -> None:
        """Write the selected kernel's repro script into the working folder."""
        k = self.selected()
        if k is not None:
            self.write_repro(k)

    @work(thread=True, exclusive=True, group="repro")
    def write_repro(self, k: KernelRow) -> None:
        """Worker: write the repro script and say where (or why not)."""
        try:
            path = self.data.write_repro(k)
        except Exception as e:
            self.app.call_from_thread(self.notify, visible_line(str(e)), title="repro", severity="error", timeout=8)
            return
        self.app.call_from_thread(self.notify, f"wrote {visible_line(path)}; run it with python", title="repro",
                                  timeout=8)


class SearchScreen(ModalScreen):
    """``/``: find symbols and source lines of the shown pass and kernel names; enter jumps."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close"), Binding("down", "focus_results", show=False)]

    def __init__(self, search):
        super().__init__()
        self.search = search
        self.hits: list[SearchHit] = []

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        with Vertical():
            yield Input(placeholder="search symbols, source lines, kernels …", id="q")
            yield OptionList(id="hits")

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self.hits = self.search(event.value)
        ol = self.query_one(OptionList)
        ol.clear_options()
        icons = {"symbol": ("sym ", "#61afef"), "source": ("src ", "#56b6c2"), "kernel": ("krn ", "#ff79c6")}
        for h in self.hits:
            label, colour = icons.get(h.kind, ("    ", "white"))
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append(label, style=Style(color=colour, bold=True))
            t.append(visible_line(h.text)[:300])
            ol.add_option(Option(t))
        if self.hits:
            ol.highlighted = 0

    @on(Input.Submitted)
    def _submitted(self) -> None:
        if self.hits:
            ol = self.query_one(OptionList)
            self.dismiss(self.hits[ol.highlighted or 0])

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.hits[event.option_index])

    def action_focus_results(self) -> None:
        """Move focus from the query to the results."""
        self.query_one(OptionList).focus()


class PassPicker(ModalScreen):
    """Choose a pass of the current chain (jump to it, or diff against it)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, title: str, passes, current: Optional[int] = None):
        super().__init__()
        self.title_text = title
        self.passes = list(passes)
        self.current = current

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        with Vertical():
            yield Static(Text(self.title_text, style=Style(bold=True)))
            yield OptionList(*[Option(panels.pass_row(p)) for p in self.passes], id="picks")

    def on_mount(self) -> None:
        """Fill the screen and focus its main widget."""
        ol = self.query_one(OptionList)
        for i, p in enumerate(self.passes):
            if p.index == self.current:
                ol.highlighted = i
        ol.focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.passes[event.option_index].index)


class RunScreen(ModalScreen):
    """The run: what ran, how it ended, eager chains, fallbacks and the traceback."""

    BINDINGS = [Binding("escape,t,q", "dismiss(None)", "Close")]

    def __init__(self, overview: ViewOverview):
        super().__init__()
        self.overview = overview

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        with VerticalScroll():
            yield Static(panels.run_summary(self.overview), id="runinfo")


HELP = [
    ("Passes", [("n / p", "next / previous pass"), ("j", "jump to a pass"), ("c / g", "next chain / next graph"),
                ("u", "hide passes that changed nothing")]),
    ("Trace and diff", [("d", "diff against the previous pass"), ("D", "diff against a chosen pass"),
                        ("s", "unified / side by side"), ("f", "fold unchanged lines / show all"),
                        ("enter", "open / close a fold: the signature, repeated layers (or click it)"),
                        ("↑ ↓ PgUp PgDn", "select a line (or click)"), ("← →", "scroll sideways")]),
    ("Details", [("i", "show / hide the details pane"), ("e", "open the source line in $EDITOR")]),
    ("Kernels", [("k", "kernels table"), ("s", "sort (or click a column)"), ("r", "re-run with every executor"),
                 ("R", "write a repro script"), ("a", "machine code per GPU target: [ ] stage, t target, u symbol, tab pane")]),
    ("Numerics", [("N", "kernels by verdict (run --check-numerics); enter: kernel + bisect"),
                  ("B", "bisect the chain shown: the pass and symbol that change the numbers")]),
    ("Source", [("S", "your files line by line: ops, kernels, torch fallbacks, time share"),
                ("enter", "show that line's ops in their pass"), ("k", "that line's kernel in the kernels table"),
                ("n / p", "next / previous line with ops"),
                ("f", "next file")]),
    ("Ranks (a group folder)", [("ctrl+r", "switch rank: status, variant, host, times"),
                                ("=", "compare ranks: variants, differing passes (enter: diff), kernel skew")]),
    ("Anywhere", [("/", "search"), ("t", "run info and traceback"),
                  ("m", "communication: collectives in the traces and between graphs"), ("ctrl+p", "command palette"),
                  ("?", "this help"), ("tab", "next panel"), ("q", "quit")]),
]


class HelpScreen(ModalScreen):
    """Every key binding, grouped."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss(None)", "Close")]

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        t = Text()
        t.append("thundervis — keys\n", style=Style(bold=True, color="#e5c07b"))
        for group, keys in HELP:
            t.append(f"\n{group}\n", style=panels.HEAD)
            for key, what in keys:
                t.append(f"  {key:<16}", style=Style(bold=True))
                t.append(what + "\n")
        t.append("\nThe mouse works too: click passes, lines, column headers.\n", style=Style(dim=True))
        with VerticalScroll():
            yield Static(t)
