"""The thundervis terminal UI: chains and passes on the left, the trace or a diff in the middle,
the details of the selected line on the right (below it on a narrow terminal).

Heavy work (loading and validating traces, diffing, lineage, re-runs) runs in thread workers; the
UI thread only draws. A timer polls the recording's revision so a live run's passes appear as
they are recorded.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from thundervis.safe_text import visible, visible_line

from . import panels
from .comm_screen import CommunicationScreen
from .editor import open_in_editor
from .folding import FoldedLines, fold_signature
from thundervis.present.default_view import default_view
from thundervis.present.overview import ViewOverview

from thundervis.present.trace_lines import text_lines

from .data import DataError, RecordingData, SearchHit
from .lines_view import LinesView
from .navigation import PassNavigation
from .palette import palette_entries
from .rank_navigation import RankNavigation
from .screens import HelpScreen, KernelsScreen, RunScreen, SearchScreen
from .source_screen import SourceJump, SourceScreen

NARROW = 110  # below this many columns the details pane goes under the trace
SHORT = 34  # ... and below this many rows too it shows only when asked (i)
NARROW_PASS_ROWS = 4  # the pass band's least height on a narrow terminal ...
PASS_ROWS = 9  # ... and the passes it always has room for (a compiled chain's)
CONTEXT = 3  # unchanged lines kept around each change when a diff is folded
IDLE_S = 0.25  # the user stayed this long on a pass or line: prepare its neighbours / details
# Worker threads run Python (loading traces, diffing, lineage) while the UI thread waits on the
# terminal; a short GIL switch interval lets the UI thread back in quickly when a key arrives.
SWITCH_INTERVAL_S = 0.0005


class ThundervisApp(PassNavigation, RankNavigation, App):
    """Browse one recording (a :class:`tui.data.RecordingData`), or one rank at a time of a group
    (``group``, a :class:`tui.group_data.GroupData`, showing rank ``rank`` first)."""

    TITLE = "thundervis"
    ENABLE_COMMAND_PALETTE = True

    # The layout, shipped as package data. An absolute path: Textual reads a relative one beside the
    # module of the running app's class, which for a subclass (the live view) is another folder.
    CSS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.tcss")

    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+r", "pick_rank", "Rank"),  # these two only on a group (first, so 80 columns show them)
        Binding("equals_sign", "compare_ranks", "Compare"),
        Binding("n", "step(1)", "Next"),
        Binding("p", "step(-1)", "Prev"),
        Binding("d", "toggle_diff", "Diff"),
        Binding("D", "diff_against", "Diff vs…", show=False),
        Binding("s", "toggle_side", "Side"),
        Binding("f", "toggle_fold", "Fold", show=False),
        Binding("u", "toggle_unchanged", "Hide unchanged", show=False),
        Binding("c", "next_chain", "Chain"),
        Binding("g", "next_graph", "Graph", show=False),
        Binding("j", "jump", "Jump", show=False),
        Binding("k", "kernels", "Kernels"),
        Binding("N", "numerics", "Numerics", show=False),
        Binding("B", "bisect", "Bisect", show=False),
        Binding("slash", "search", "Search"),
        Binding("e", "edit", "Editor", show=False),
        Binding("i", "toggle_details", "Details"),
        Binding("t", "run_info", "Run", show=False),
        Binding("m", "communication", "Comm", show=False),
        Binding("S", "source", "Source", show=False),
        Binding("question_mark", "help", "Help"),
    ]

    # Actions that act on the pass view; other screens (kernels, help ...) switch them off.
    MAIN_ONLY = {"step", "toggle_diff", "diff_against", "toggle_side", "toggle_fold", "toggle_unchanged",
                 "next_chain", "next_graph", "jump", "edit", "toggle_details", "search", "kernels", "run_info",
                 "communication", "source"}

    def check_action(self, action: str, parameters) -> Optional[bool]:
        """Pass-view actions only run (and show in the footer) on the main screen; rank actions
        only on a group."""
        allowed = self.rank_action_allowed(action)
        if allowed is not None:
            return allowed
        if action in self.MAIN_ONLY and len(self.screen_stack) > 1:
            return False
        return True

    def __init__(self, data: RecordingData, poll_s: float = 1.0, group=None, rank: Optional[int] = None):
        super().__init__()
        self.data = data
        self.group, self.rank = group, rank
        self.poll_s = poll_s
        self.overview: Optional[ViewOverview] = None
        self.graph: Optional[int] = None
        self.chain: Optional[str] = None
        self.index: Optional[int] = None
        self.diff_from: Optional[int] = None  # None: no diff; -1: the previous pass; else that pass
        self.side_by_side = False
        self.folded = True
        self.hide_unchanged = False
        self.details_hidden = False
        self.lines = []  # PrintedLine on screen, one per view line (the signature folded or not)
        self.printed_lines = []  # every PrintedLine of the pass shown (search reads them)
        self.signature_folded = True  # the def + inputs block shows as one line until opened
        self.shown: Optional[FoldedLines] = None  # the trace lines on screen (the block folded or not)
        self.selected_uid: Optional[str] = None
        self.selected_source: Optional[tuple[str, int]] = None
        self._token = 0
        self._detail_timer = None
        self._prefetch_timer = None
        self._pending_line: Optional[int] = None  # a search hit to select once the trace is shown
        self._pending_uid: Optional[str] = None  # a symbol to select once the trace is shown (Source)
        self.loaded = False  # the current view's content is on screen (tests and benchmarks wait on it)

    # -- layout ---------------------------------------------------------------------------------

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: Optional[float] = None, markup: bool = False) -> None:
        """Show a toast. Toasts quote recorded names (files, kernels, errors), so they are always
        plain text with control characters made visible, never Textual markup, whatever a caller
        (a screen or widget forwards here) passes as ``markup``."""
        super().notify(visible(str(message)), title=visible_line(str(title)), severity=severity,
                       timeout=timeout, markup=False)

    def compose(self) -> ComposeResult:
        """The top bar, banner, chains and stepper, trace view, details, footer."""
        yield Static(id="topbar")
        yield Static(id="banner")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield Static("chains", classes="label")
                yield OptionList(id="chains")
                yield Static("passes   time  symbols", classes="label")
                yield OptionList(id="passes")
            with Vertical(id="center"):
                yield Static(id="tracetitle")
                yield LinesView(id="lines")
            with VerticalScroll(id="details"):
                yield Static(id="detailtext")
        yield Footer()

    def on_mount(self) -> None:
        """Read the overview, show the first view, start polling."""
        import sys
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._apply_width(self.size.width)
        self.refresh_overview(first=True)
        if self.group is not None:
            self.load_group_info()
        self.query_one(LinesView).focus()
        if self.poll_s:
            self.set_interval(self.poll_s, self.poll)

    def on_unmount(self) -> None:
        """Give the interpreter its usual switch interval back."""
        import sys
        sys.setswitchinterval(getattr(self, "_switch_interval", 0.005))

    def on_resize(self, event) -> None:
        """Narrow or short terminals rearrange the panes."""
        self._apply_width(event.size.width, event.size.height)

    def _apply_width(self, width: int, height: Optional[int] = None) -> None:
        height = self.size.height if height is None else height
        self.screen.set_class(width < NARROW, "-narrow")
        # A small terminal keeps its rows for the trace; `i` shows the details under it.
        self.screen.set_class(width < NARROW and height < SHORT, "-short")
        self._size_pass_list(width, height)

    def _size_pass_list(self, width: Optional[int] = None, height: Optional[int] = None) -> None:
        """On a narrow terminal the chains and passes sit in a band above the trace: make it tall
        enough for every pass of the chain (9 in a compiled chain) so none hides at 80x24, up to a
        third of a taller terminal."""
        width = self.size.width if width is None else width
        height = self.size.height if height is None else height
        left = self.query_one("#left")
        if width >= NARROW:
            left.styles.height = None  # the CSS's: the full height beside the trace
            return
        rows = min(max(NARROW_PASS_ROWS, len(getattr(self, "_pass_keys", ()))), max(PASS_ROWS, height // 3))
        # a short terminal drops the band's bottom border (the trace title below separates them)
        short = self.screen.has_class("-short")
        left.styles.border_bottom = ("none", "black") if short else None
        left.styles.height = rows + (0 if short else 1)

    # -- overview -------------------------------------------------------------------------------

    def refresh_overview(self, first: bool = False) -> None:
        """Read the overview and redraw the chain list, the stepper and the top bar."""
        try:
            ov = self.data.overview()
        except DataError as e:
            self.notify(visible_line(str(e)), severity="error")
            return
        self._set_overview(ov, first)

    def _set_overview(self, ov: ViewOverview, first: bool = False) -> None:
        self.overview = ov
        if self.graph is None or ov.chain(self.graph, self.chain or "") is None:
            dv = default_view(ov.graphs)
            self.graph, self.chain = (dv.graph, dv.chain) if dv is not None else (None, None)
        c = ov.chain(self.graph, self.chain) if self.graph is not None else None
        if c is not None and c.passes and (self.index is None or self.index not in {p.index for p in c.passes}):
            self.index = c.passes[-1].index
        self._fill_chains()
        self._fill_passes()
        self._update_topbar()
        self._update_banner()
        if first:
            self.show_view(fast=True)

    def _fill_chains(self) -> None:
        ol = self.query_one("#chains", OptionList)
        ov = self.overview
        self._chain_keys = []
        ol.clear_options()
        for g in ov.graphs:
            for c in g.chains:
                ol.add_option(Option(panels.chain_row(c, ov.status(g.id, c.kind))))
                self._chain_keys.append((g.id, c.kind))
        if not self._chain_keys:
            ol.add_option(Option(Text("no compiled graph", style=Style(dim=True)), disabled=True))
        for i, key in enumerate(self._chain_keys):
            if key == (self.graph, self.chain):
                ol.highlighted = i

    def visible_passes(self, c=None):
        """Return the passes of the current chain shown in the stepper (unchanged ones hidden when
        asked; the first pass and the current one always stay)."""
        c = c or self.current_chain()
        if c is None:
            return []
        if not self.hide_unchanged:
            return list(c.passes)
        return [p for p in c.passes if p.changed or p.index == self.index or p is c.passes[0]]

    def _fill_passes(self) -> None:
        ol = self.query_one("#passes", OptionList)
        ol.clear_options()
        self._pass_keys = []
        for p in self.visible_passes():
            ol.add_option(Option(panels.pass_row(p)))
            self._pass_keys.append(p.index)
        for i, idx in enumerate(self._pass_keys):
            if idx == self.index:
                ol.highlighted = i
        self._size_pass_list()

    def current_chain(self):
        """Return the chain shown (a ``recording.model.Chain``) or None."""
        if self.overview is None or self.graph is None:
            return None
        return self.overview.chain(self.graph, self.chain)

    def current_pass(self):
        """Return the pass shown (a ``recording.model.PassInfo``) or None."""
        c = self.current_chain()
        return next((p for p in c.passes if p.index == self.index), None) if c else None

    def _update_topbar(self) -> None:
        self.query_one("#topbar", Static).update(panels.topbar(self.overview, self.group_bar()))

    def _update_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        text = panels.banner(self.overview.run)
        banner.set_class(text is not None, "-shown")
        banner.update(text or "")

    # -- the middle view ------------------------------------------------------------------------

    def diff_base(self) -> Optional[int]:
        """Return the pass the diff compares against (None when no diff is shown)."""
        if self.diff_from is None or self.index is None:
            return None
        if self.diff_from >= 0:
            return self.diff_from
        c = self.current_chain()
        earlier = [p.index for p in self.visible_passes(c) if p.index < self.index] if c else []
        return earlier[-1] if earlier else None

    def show_view(self, fast: bool = False, keep_cursor: bool = False) -> None:
        """Show the current pass (or its diff). ``fast``: draw the stored text at once (plain
        lines), then load the trace's structured lines in a worker (cold start)."""
        self._token += 1
        self.loaded = False
        token = self._token
        view = self.query_one(LinesView)
        self._update_title()
        if self.graph is None or self.index is None:
            view.set_trace(text_lines(["no compiled graph in this recording yet"]))
            self.loaded = True
            if self.overview is not None and self.overview.run.traceback:
                self.query_one("#detailtext", Static).update(panels.run_summary(self.overview))
            return
        args = (self.graph, self.chain, self.index, self.diff_base(), self.side_by_side, self.folded)
        if self.content_ready(*args):  # memoised (prefetched): show it now, no worker round trip
            self._show_content(token, self._content(*args), keep_cursor)
            return
        if fast and self.diff_base() is None:
            try:
                text = self.data.pass_text(self.graph, self.chain, self.index)
                self.shown = None
                view.set_trace(text_lines(text.splitlines()), keep_cursor)
            except DataError as e:
                self.notify(visible_line(str(e)), severity="error")
            # Paint the stored text first; the worker that prints the trace's structured lines
            # would hold the interpreter while the first frame is drawn.
            self.set_timer(0.05, lambda: self.load_view(token, *args, keep_cursor))
            return
        self.load_view(token, *args, keep_cursor)

    def _content(self, graph: int, chain: str, index: int, base: Optional[int], side: bool, folded: bool):
        """Return ("trace", lines, None) or (mode, diff rows, counts) for one view (memoised)."""
        if base is None:
            return "trace", self.data.trace_lines(graph, chain, index), None
        rows, counts = self.data.diff_rows(graph, chain, base, index, side, CONTEXT if folded else None)
        return ("side" if side else "unified"), rows, counts

    def content_ready(self, graph: int, chain: str, index: int, base: Optional[int], side: bool,
                      folded: bool) -> bool:
        """Return whether a view's content is memoised (then showing it needs no worker)."""
        if base is None:
            return self.data.cached("lines", (graph, chain, index))
        return self.data.cached("rows", (graph, chain, base, index, side, CONTEXT if folded else None))

    @work(thread=True, exclusive=True, group="view")
    def load_view(self, token: int, graph: int, chain: str, index: int, base: Optional[int], side: bool,
                  folded: bool, keep_cursor: bool) -> None:
        """Worker: build the lines of a pass or the rows of a diff, then hand them to the UI."""
        try:
            content = self._content(graph, chain, index, base, side, folded)
        except DataError as e:  # a damaged pass: say so in the view, the rest stays usable
            message = text_lines([f"# this pass cannot be shown: {e}"])
            self.call_from_thread(self.notify, visible_line(str(e)), severity="error")
            content = ("trace", message, None)
        self.call_from_thread(self._show_content, token, content, keep_cursor)

    def _schedule_prefetch(self) -> None:
        """Prepare the neighbouring passes once the user has stayed on this one for a moment
        (work started during a burst of keys would only slow the keys down)."""
        if self._prefetch_timer is not None:
            self._prefetch_timer.stop()
        args = (self.graph, self.chain, self.index, self.side_by_side, self.folded)
        self._prefetch_timer = self.set_timer(IDLE_S, lambda: self.prefetch(*args))

    @work(thread=True, exclusive=True, group="prefetch")
    def prefetch(self, graph: int, chain: str, index: int, side: bool, folded: bool) -> None:
        """Worker: build the next and previous passes' views (with the same diff setting) while
        the user reads this one, so stepping is a lookup."""
        keys = [p.index for p in self.visible_passes(self.overview.chain(graph, chain))] if self.overview else []
        if index not in keys:
            return
        pos = keys.index(index)
        for step in (1, -1):
            if not 0 <= pos + step < len(keys):
                continue
            nxt = keys[pos + step]
            base = None
            if self.diff_from is not None:
                base = self.diff_from if self.diff_from >= 0 else (keys[pos + step - 1] if pos + step > 0 else None)
            try:
                self._content(graph, chain, nxt, base, side, folded)
            except DataError:
                pass

    def _show_content(self, token: int, content, keep_cursor: bool) -> None:
        if token != self._token:
            return
        kind, rows, counts = content
        view = self.query_one(LinesView)
        if kind == "trace":
            self.printed_lines = rows
            self._show_trace(keep_cursor)
        elif kind == "side":
            view.set_side_by_side(rows, keep_cursor)
        else:
            view.set_unified(rows, keep_cursor)
        self._update_title(counts)
        self._schedule_prefetch()
        pending = self._pending_line
        if pending is not None and kind == "trace":
            self._pending_line = None
            self.select_printed_line(pending)
        if self._pending_uid is not None and kind == "trace":
            self._select_uid(self._pending_uid)
            self._pending_uid = None
        self.loaded = True

    def _show_trace(self, keep_cursor: bool) -> None:
        """Show ``self.printed_lines`` (the pass's) with the signature block folded or not."""
        from .numerics_screen import trace_marks
        self.shown = fold_signature(self.printed_lines, self.signature_folded)
        self.lines = self.shown.lines
        marks = trace_marks(self.overview.numerics if self.overview is not None else None, self.graph, self.chain)
        self.query_one(LinesView).set_trace(self.shown.lines, keep_cursor, marks)

    def select_printed_line(self, printed: int) -> None:
        """Move the cursor to line ``printed`` of the pass's printed lines (a search hit),
        opening the signature block first when the line is inside it."""
        view = self.query_one(LinesView)
        if self.shown is not None and self.shown.hides(printed):
            self.signature_folded = False
            self._show_trace(keep_cursor=True)
        view.move_cursor(self.shown.shown_index(printed) if self.shown is not None else printed)

    @on(LinesView.Activated)
    def _line_activated(self, event: LinesView.Activated) -> None:
        """Enter or a click on the fold line opens or closes the signature block."""
        if event.view.id != "lines" or event.view.mode != "trace" or self.shown is None or not self.shown.is_fold_line(event.index):
            return
        self.signature_folded = not self.signature_folded
        self._show_trace(keep_cursor=True)

    def _update_title(self, counts: Optional[dict] = None) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        p = self.current_pass()
        if p is None:
            self.query_one("#tracetitle", Static).update(t)
            return
        t.append(f"g{p.graph} {visible_line(p.chain)} ", style=Style(dim=True))
        t.append(f"{p.index} {visible_line(p.name)}", style=Style(bold=True, color="#e5c07b"))
        base = self.diff_base()
        if self.diff_from is not None:
            if base is None:
                t.append("  diff: no earlier pass", style=Style(color=panels.WARN))
            else:
                t.append(f"  vs {base}", style=Style(color="#56b6c2", bold=True))
                t.append(" side by side" if self.side_by_side else "", style=Style(color="#56b6c2"))
                if counts is not None:
                    bits = [f"{v} {k}" for k, v in counts.items() if v and k != "unchanged"]
                    t.append(("  " + ", ".join(bits)) if bits else "  no change", style=Style(dim=True))
        else:
            t.append(f"  {p.duration_ms:.1f} ms · {p.n_symbols} symbols", style=Style(dim=True))
            if not p.changed:
                t.append(" · changed nothing", style=Style(dim=True))
        self.query_one("#tracetitle", Static).update(t)

    # -- selection and details ------------------------------------------------------------------

    @on(LinesView.CursorMoved)
    def _cursor_moved(self, event: LinesView.CursorMoved) -> None:
        self.selected_uid = event.uid
        if self._detail_timer is not None:
            self._detail_timer.stop()
        if event.uid is None:
            self.selected_source = None
            if self.overview is not None:
                hint = Text("select a line to see where it came from, what it became and where it runs\n\n",
                            style=Style(dim=True, italic=True))
                self.query_one("#detailtext", Static).update(hint + panels.run_summary(self.overview, versions=False))
            return
        self._detail_timer = self.set_timer(2 * IDLE_S, lambda: self.load_details(
            self.graph, self.chain, self.index, event.uid))

    @work(thread=True, exclusive=True, group="details")
    def load_details(self, graph: int, chain: str, index: int, uid: str) -> None:
        """Worker: gather the selected symbol's details."""
        from dataclasses import replace
        try:
            d = self.data.symbol_detail(graph, chain, index, uid, with_lineage=False)
            src = (d.source_file, d.source_line) if d.source_file and d.source_line else None
            # What is quick first; the lineage (every pass of every chain) follows.
            waiting = panels.symbol_details(d) + Text("\nlineage …\n", style=Style(dim=True))
            self.call_from_thread(self._show_details, uid, waiting, src)
            d = replace(d, lineage=self.data.lineage(graph, uid))
        except DataError as e:
            self.call_from_thread(self._show_details, uid, Text(visible_line(str(e)), style=Style(dim=True)), None)
            return
        self.call_from_thread(self._show_details, uid, panels.symbol_details(d), src)

    def _show_details(self, uid: str, text: Text, src) -> None:
        if uid != self.selected_uid:
            return
        self.selected_source = src
        self.query_one("#detailtext", Static).update(text)

    @on(OptionList.OptionSelected, "#passes")
    @on(OptionList.OptionHighlighted, "#passes")
    def _pass_chosen(self, event) -> None:
        keys = getattr(self, "_pass_keys", [])
        if 0 <= event.option_index < len(keys) and keys[event.option_index] != self.index:
            self.go_to_pass(keys[event.option_index])

    @on(OptionList.OptionSelected, "#chains")
    def _chain_chosen(self, event) -> None:
        keys = getattr(self, "_chain_keys", [])
        if 0 <= event.option_index < len(keys):
            self.go_to_chain(*keys[event.option_index])

    # -- actions: panes and screens -------------------------------------------------------------

    def action_toggle_details(self) -> None:
        """Show or hide the details pane."""
        details = self.query_one("#details")
        if self.screen.has_class("-short"):
            details.toggle_class("-shown")
            return
        self.details_hidden = not self.details_hidden
        details.set_class(self.details_hidden, "-hidden")

    def action_kernels(self, kernel_id: Optional[int] = None) -> None:
        """Open the kernels table (on ``kernel_id`` when given)."""
        if self.overview is not None:
            self.push_screen(KernelsScreen(self.data, self.overview, kernel_id))

    def action_numerics(self) -> None:
        """Open the numerics screen: kernels by verdict."""
        if self.overview is not None:
            from .numerics_screen import NumericsScreen
            self.push_screen(NumericsScreen(self.data, self.overview, self.overview.numerics))

    def action_bisect(self) -> None:
        """Bisect the chain shown (every pass on the same inputs, in a worker)."""
        if self.overview is not None and self.graph is not None and self.chain:
            from .numerics_screen import BisectScreen
            self.push_screen(BisectScreen(self.data, self.graph, self.chain))

    def action_run_info(self) -> None:
        """Show the run: status, eager chains, fallbacks, traceback."""
        if self.overview is not None:
            self.push_screen(RunScreen(self.overview))

    def action_communication(self) -> None:
        """Show the run's collectives: traced into the graphs, and run between them per place."""
        if self.overview is not None:
            self.push_screen(CommunicationScreen(self.data))

    def action_help(self) -> None:
        """Show every key binding."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_search(self) -> None:
        """Search symbols and source lines of the pass shown, and kernel names."""
        if self.overview is None:
            return

        lines = self.printed_lines if self.lines else []
        if self.diff_from is not None and self.graph is not None:  # search the pass's trace, not the diff
            try:
                lines = self.data.trace_lines(self.graph, self.chain, self.index)
            except DataError:
                lines = []

        def search(q: str):
            return self.data.search(q, self.graph, self.chain, self.index, lines, self.overview.kernels)

        def done(hit: Optional[SearchHit]):
            if hit is None:
                return
            if hit.kind == "kernel":
                self.action_kernels(hit.kernel_id)
                return
            if self.diff_from is not None:
                self.diff_from = None
                self._pending_line = hit.line
                self.show_view()
                return
            self.select_printed_line(hit.line or 0)
            self.query_one(LinesView).focus()
        self.push_screen(SearchScreen(search), done)

    def action_source(self) -> None:
        """Open the Source screen on the selected line's file (else the run's script); enter there
        comes back to that line's ops in the final pass of their chain."""
        if self.overview is None:
            return
        file, line = self.selected_source or (None, None)
        try:
            files = self.data.source_files()
            if file not in files:
                file, line = self.data.default_source_file(), None
        except DataError as e:
            self.notify(visible_line(str(e)), severity="error")
            return

        def done(jump: Optional[SourceJump]) -> None:
            if jump is not None:
                self.show_ops(jump)
        self.push_screen(SourceScreen(self.data.source_file, files, file=file, line=line), done)

    def show_ops(self, jump: SourceJump) -> None:
        """Show the final pass of ``jump``'s chain with the cursor on its first op (``to_kernel``:
        the kernels table on its kernel)."""
        if jump.to_kernel and jump.kernel_id is not None:
            self.action_kernels(jump.kernel_id)
            return
        self.diff_from = None
        c = self.overview.chain(jump.graph, jump.chain) if self.overview else None
        if c is None or not c.passes:
            return
        last = c.passes[-1].index
        if (jump.graph, jump.chain, last) == (self.graph, self.chain, self.index) and self.loaded:
            self._select_uid(jump.uids[0])
            return
        self._pending_uid = jump.uids[0]
        if (jump.graph, jump.chain) != (self.graph, self.chain):
            self.go_to_chain(jump.graph, jump.chain)
        if self.index != last:
            self.go_to_pass(last)
        else:
            self.show_view()

    def _select_uid(self, uid: str) -> None:
        view = self.query_one(LinesView)
        for i in range(view.line_count()):
            if view.uid_at(i) == uid:
                view.move_cursor(i)
                view.focus()
                return

    def action_edit(self) -> None:
        """Open the selected line's source in ``$EDITOR`` (``+LINE FILE``), then come back."""
        open_in_editor(self, self.selected_source)

    # -- live updates ---------------------------------------------------------------------------

    def poll(self) -> None:
        """Timer: look for new passes, graphs or a changed run status in a worker."""
        if self.overview is not None:
            self.check_revision(self.overview.revision)

    @work(thread=True, exclusive=True, group="poll")
    def check_revision(self, known) -> None:
        """Worker: reload the overview when the recording changed."""
        try:
            if self.data.revision() == known:
                return
            ov = self.data.overview()
        except DataError:
            return
        self.call_from_thread(self._live_update, ov)

    def _live_update(self, ov: ViewOverview) -> None:
        if self.group is not None:  # a rank changed: so may the group's status
            self.load_group_info()
        before = self.current_chain()
        was_last = before is not None and before.passes and self.index == before.passes[-1].index
        self._set_overview(ov)
        c = self.current_chain()
        if c is not None and c.passes and (self.index is None or was_last):
            if self.index != c.passes[-1].index or self.index is None:
                self.index = c.passes[-1].index
                self._fill_passes()
                self.show_view(keep_cursor=True)

    # -- command palette ------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action of the app, plus Textual's own commands."""
        yield from super().get_system_commands(screen)
        entries = palette_entries(self)
        for title, help_text, callback in entries:
            yield SystemCommand(title, help_text, callback)


class _RefusingApp(ThundervisApp):
    """The app as ``run_app`` runs it: a recording found unreadable while it runs (an exception no
    view caught) ends it quietly; ``run_app`` then raises that one sentence (exit 2 at the CLI)
    instead of Textual's traceback screen and exit 0."""

    refused: Optional[str] = None

    def _handle_exception(self, error: Exception) -> None:
        from thundervis.recording import RecordingError
        cause = getattr(error, "error", error)  # a worker's failure wraps the exception
        if isinstance(cause, (RecordingError, DataError)):
            if self.refused is None:
                self.refused = str(cause)
            self.exit(return_code=2)
            return
        super()._handle_exception(error)


def run_app(data: RecordingData, poll_s: float = 1.0, group=None, rank: Optional[int] = None) -> None:
    """Run the TUI on an open recording (rank ``rank`` of ``group`` when given) until the user
    quits, then close it (with a group: every rank opened). Raises ``RecordingError`` (one sentence)
    when the recording turned out unreadable while the UI ran."""
    app = _RefusingApp(data, poll_s=poll_s, group=group, rank=rank)
    try:
        app.run()
    finally:
        (group if group is not None else data).close()
    if app.refused is not None:
        from thundervis.recording import RecordingError
        raise RecordingError(app.refused)


def view_recording(path: str, poll_s: float = 1.0, rank: Optional[int] = None) -> None:
    """Open the recording or group folder at ``path`` (a group on ``rank``, default its lowest)
    in the TUI, blocking until the user quits; raises ``tui.data.DataError`` (one sentence) when
    it is not a readable recording or group."""
    if os.path.isdir(path):
        from .group_data import open_group_data
        group = open_group_data(path)
        try:
            rank, data = group.start(rank)
        except DataError:
            group.close()
            raise
        run_app(data, poll_s, group=group, rank=rank)
        return
    from .data import open_data
    run_app(open_data(path), poll_s)
