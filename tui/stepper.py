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
from .view_state import ViewState, visible_passes

NARROW = 110  # below this many columns the details pane goes under the trace
NARROW_PASS_ROWS = 4  # the pass band's least height on a narrow terminal ...
PASS_ROWS = 9  # ... and the passes it always has room for (a compiled chain's)


class Stepper(Vertical):
    """Chains and passes; ``chain_keys`` ((graph, kind) per chain row) and ``pass_keys`` (the pass
    index per stepper row) map the rows the user picks back to the view state."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chain_keys: list[tuple[int, str]] = []
        self.pass_keys: list[int] = []

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
        ol.clear_options()
        for g in overview.graphs:
            for c in g.chains:
                ol.add_option(Option(panels.chain_row(c, overview.status(g.id, c.kind))))
                self.chain_keys.append((g.id, c.kind))
        if not self.chain_keys:
            ol.add_option(Option(Text("no compiled graph", style=Style(dim=True)), disabled=True))
        if (state.graph, state.chain) in self.chain_keys:
            ol.highlighted = self.chain_keys.index((state.graph, state.chain))

    def fill_passes(self, chain, state: ViewState) -> None:
        """List the visible passes of ``chain`` (a ``Chain`` or None), the state's highlighted."""
        ol = self.query_one("#passes", OptionList)
        ol.clear_options()
        self.pass_keys = []
        for p in visible_passes(state, chain):
            ol.add_option(Option(panels.pass_row(p)))
            self.pass_keys.append(p.index)
        self.highlight(state)
        self.fit()

    def highlight(self, state: ViewState) -> None:
        """Highlight the state's pass (without announcing it as the user's pick)."""
        ol = self.query_one("#passes", OptionList)
        if state.index in self.pass_keys:
            pos = self.pass_keys.index(state.index)
            if ol.highlighted != pos:
                with ol.prevent(OptionList.OptionHighlighted):
                    ol.highlighted = pos

    def fit(self, width: int | None = None, height: int | None = None) -> None:
        """On a narrow terminal the chains and passes sit in a band above the trace: make it tall
        enough for every pass of the chain (9 in a compiled chain) so none hides at 80x24, up to a
        third of a taller terminal."""
        width = self.app.size.width if width is None else width
        height = self.app.size.height if height is None else height
        if width >= NARROW:
            self.styles.height = None  # the CSS's: the full height beside the trace
            return
        rows = min(max(NARROW_PASS_ROWS, len(self.pass_keys)), max(PASS_ROWS, height // 3))
        # a short terminal drops the band's bottom border (the trace title below separates them)
        short = self.screen.has_class("-short")
        self.styles.border_bottom = ("none", "black") if short else None
        self.styles.height = rows + (0 if short else 1)
