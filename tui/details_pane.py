"""The right pane: the details of the selected symbol of a :class:`ViewState` (source, lineage,
fusion, backward twins, timing), gathered in a worker once the cursor rests on a line; a hint and
the run's summary when no line is selected."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from thundervis.safe_text import visible_line

from . import panels
from .data import DataError
from .view_state import ViewState

IDLE_S = 0.25  # the cursor rested this long (twice) on a line: gather its details

HINT = "select a line to see where it came from, what it became and where it runs\n\n"


class DetailsPane(VerticalScroll):
    """The details of the state last handed to :meth:`select`; ``source`` is the selected
    symbol's (file, line), None when it has none (``e`` and ``S`` open it)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source: Optional[tuple[str, int]] = None
        self._state = ViewState()
        self._timer = None

    def compose(self) -> ComposeResult:
        """The one text."""
        yield Static(id="detailtext")

    def show_text(self, text: Text) -> None:
        """Show ``text`` (the run's summary when there is no graph)."""
        self.query_one("#detailtext", Static).update(text)

    def select(self, data, overview, state: ViewState) -> None:
        """Show the details of ``state``'s selected symbol of ``data`` once the cursor rests (the
        hint and ``overview``'s run summary when no line is selected)."""
        self._state = state
        if self._timer is not None:
            self._timer.stop()
        if state.selected_uid is None:
            self.source = None
            if overview is not None:
                hint = Text(HINT, style=Style(dim=True, italic=True))
                self.show_text(hint + panels.run_summary(overview, versions=False))
            return
        self._timer = self.set_timer(2 * IDLE_S, lambda: self.load(data, state))

    @work(thread=True, exclusive=True, group="details")
    def load(self, data, state: ViewState) -> None:
        """Worker: gather the details of ``state``'s selected symbol."""
        uid = state.selected_uid
        try:
            d = data.symbol_detail(state.graph, state.chain, state.index, uid, with_lineage=False)
            src = (d.source_file, d.source_line) if d.source_file and d.source_line else None
            # What is quick first; the lineage (every pass of every chain) follows.
            waiting = panels.symbol_details(d) + Text("\nlineage …\n", style=Style(dim=True))
            self.app.call_from_thread(self._show, state, waiting, src)
            d = replace(d, lineage=data.lineage(state.graph, uid))
        except DataError as e:
            self.app.call_from_thread(self._show, state, Text(visible_line(str(e)), style=Style(dim=True)), None)
            return
        self.app.call_from_thread(self._show, state, panels.symbol_details(d), src)

    def _show(self, state: ViewState, text: Text, src) -> None:
        if (state.rank, state.selected_uid) != (self._state.rank, self._state.selected_uid):
            return  # the user has selected another line since
        self.source = src
        self.show_text(text)
