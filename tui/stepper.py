"""The left pane: the chain list and the pass stepper of a :class:`ViewState` (a band above the
trace on a narrow terminal, tall enough for every pass of a chain)."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from . import panels
from .layout import DETAILS_ROWS, NARROW, NARROW_PASS_ROWS, PASS_ROWS, narrow_rows  # noqa: F401  (imported from here)
from .view_state import ViewState, visible_passes


class Stepper(Vertical):
    """Chains and passes; ``chain_keys`` ((graph, kind) per chain row) and ``pass_keys`` (the pass
    index per stepper row) map the rows the user picks back to the view state."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chain_keys: list[tuple[int, str]] = []
        self.pass_keys: list[int] = []
        self._pass_rows: list = []  # each row's PassInfo (drawn again when the marker moves)
        self._marked = None  # the pass row that carries the marker
        self._overview = None  # the overview fill_chains was given (present.compile_times per graph)

    def compose(self) -> ComposeResult:
        """Labels and the two option lists."""
        yield Static("chains", classes="label")
        yield OptionList(id="chains")
        yield Static("passes   time  symbols", classes="label")
        yield OptionList(id="passes")

    def fill_chains(self, overview, state: ViewState) -> None:
        """List every chain of ``overview`` with its status, the state's highlighted."""
        ol = self.query_one("#chains", OptionList)
        self.chain_keys = []
        self._overview = overview  # the pass rows read what came from the compile cache from it
        ol.clear_options()
        mine = (state.graph, state.chain)
        for g in overview.graphs:
            ct = overview.compile_time(g.id)  # present.compile_times: what came from the cache
            for c in g.chains:
                st = overview.status(g.id, c.kind)
                cached = ct is not None and ct.chain_from_cache(c.kind) is True
                ol.add_option(Option(panels.chain_row(c, st, selected=(g.id, c.kind) == mine, cached=cached)))
                self.chain_keys.append((g.id, c.kind))
        if not self.chain_keys:
            ol.add_option(Option(Text("no compiled graph", style=Style(dim=True)), disabled=True))
        if mine in self.chain_keys:
            ol.highlighted = self.chain_keys.index(mine)

    def fill_passes(self, chain, state: ViewState) -> None:
        """List the visible passes of ``chain`` (a ``Chain`` or None), the state's highlighted."""
        ol = self.query_one("#passes", OptionList)
        ol.clear_options()
        self.pass_keys, self._pass_rows = [], []
        for p in visible_passes(state, chain):
            ol.add_option(Option(panels.pass_row(p, selected=p.index == state.index, cached=self._cached(p))))
            self.pass_keys.append(p.index)
            self._pass_rows.append(p)
        self._marked = self.pass_keys.index(state.index) if state.index in self.pass_keys else None
        self.highlight(state)
        self.fit()

    def highlight(self, state: ViewState) -> None:
        """Highlight the state's pass (without announcing it as the user's pick)."""
        ol = self.query_one("#passes", OptionList)
        if state.index in self.pass_keys:
            pos = self.pass_keys.index(state.index)
            self._move_pass_marker(ol, pos)
            if ol.highlighted != pos:
                with ol.prevent(OptionList.OptionHighlighted):
                    ol.highlighted = pos

    def _move_pass_marker(self, ol: OptionList, pos: int) -> None:
        """Draw the selection marker (not colour alone) on pass row ``pos`` and off the old one."""
        old = self._marked
        if old == pos:
            return
        if old is not None and old < len(self._pass_rows):
            row = self._pass_rows[old]
            ol.replace_option_prompt_at_index(old, panels.pass_row(row, selected=False, cached=self._cached(row)))
        row = self._pass_rows[pos]
        ol.replace_option_prompt_at_index(pos, panels.pass_row(row, selected=True, cached=self._cached(row)))
        self._marked = pos

    def _cached(self, p) -> bool:
        """Whether pass ``p`` came from the compile cache (present.compile_times says)."""
        ct = self._overview.compile_time(p.graph) if self._overview is not None else None
        return ct is not None and ct.pass_from_cache(p.chain, p.name)

    def fit(self, width: int | None = None, height: int | None = None) -> None:
        """On a narrow terminal the chains and passes sit in a band above the trace: make it tall
        enough for every pass of the chain (9 in a compiled chain) so none hides at 80x24, up to a
        third of a taller terminal; with the details pane open under the trace, give it its rows
        (layout.narrow_rows: the trace keeps at least 8)."""
        width = self.app.size.width if width is None else width
        height = self.app.size.height if height is None else height
        if width >= NARROW:
            self.styles.height = None  # the CSS's: the full height beside the trace
            self.screen.query_one("#details").styles.height = None  # and the details beside it
            return
        # a short terminal drops the band's bottom border (the trace title below separates them)
        short = self.screen.has_class("-short")
        self.styles.border_bottom = ("none", "black") if short else None
        # The details pane under the trace (on a short terminal only when asked, `i`) takes rows from
        # the band first and never the trace's last MIN_TRACE_ROWS (layout.narrow_rows).
        details = self.screen.query_one("#details")
        shown = details.has_class("-shown") if short else not details.has_class("-hidden")
        banner = 3 if self.screen.query_one("#banner").has_class("-shown") else 0  # its max-height
        band, rows = narrow_rows(height, len(self.pass_keys), short=short, details=shown, banner=banner,
                                 want=DETAILS_ROWS if short else DETAILS_ROWS - 1)
        self.styles.height = band
        details.styles.height = rows if shown else None
        # a shorter band still shows the pass that is shown
        self.call_after_refresh(self.query_one("#passes", OptionList).scroll_to_highlight)
