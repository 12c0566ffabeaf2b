"""The two screens that answer with a place to go back to in the main view: search (a symbol,
a source line or a kernel) and Source (a line's ops in their pass, or its kernel). Each pushes its
screen on ``app`` and hands the answer to a callback; the app decides what the answer shows."""
from __future__ import annotations

from typing import Callable, Optional

from thundervis.safe_text import visible_line

from .data import DataError, SearchHit
from .screens import SearchScreen
from .source_screen import SourceJump, SourceScreen
from .view_state import ViewState


def open_search(app, data, overview, state: ViewState, printed: list, on_hit: Callable[[SearchHit], None]) -> None:
    """Search the symbols and source lines of ``state``'s pass (``printed``: its printed lines
    when on screen) and ``overview``'s kernel names; ``on_hit(hit)`` once the user picks one."""
    lines = printed
    if state.diff_from is not None and state.graph is not None:  # search the pass's trace, not the diff
        try:
            lines = data.trace_lines(state.graph, state.chain, state.index)
        except DataError:
            lines = []

    def search(q: str):
        return data.search(q, state.graph, state.chain, state.index, lines, overview.kernels)

    def done(hit: Optional[SearchHit]) -> None:
        if hit is not None:
            on_hit(hit)
    app.push_screen(SearchScreen(search), done)


def open_source(app, data, selected: Optional[tuple[str, int]], on_jump: Callable[[SourceJump], None]) -> None:
    """Open the Source screen on ``selected`` (file, line), else on the run's script;
    ``on_jump(jump)`` when the user asks for a line's ops or kernel."""
    file, line = selected or (None, None)
    try:
        files = data.source_files()
        if file not in files:
            file, line = data.default_source_file(), None
    except DataError as e:
        app.notify(visible_line(str(e)), severity="error")
        return

    def done(jump: Optional[SourceJump]) -> None:
        if jump is not None:
            on_jump(jump)
    app.push_screen(SourceScreen(data.source_file, files, file=file, line=line), done)
