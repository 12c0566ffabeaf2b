"""The middle pane: a title line over the trace of one pass or the diff of two (a
:class:`LinesView`). The app hands it the :class:`ViewState` to show; the pane loads the content
in a worker and drops a result whose state is no longer the one it shows."""
from __future__ import annotations

from typing import Callable, Optional

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from thundervis.present.eager_regions import beside_regions
from thundervis.present.trace_lines import text_lines
from thundervis.safe_text import visible_line

from . import panels
from .data import DataError
from .folding import FoldedLines, fold_signature
from .lines_view import LinesView
from .view_state import ViewState, content_key, diff_base, visible_passes

CONTEXT = 3  # unchanged lines kept around each change when a diff is folded
IDLE_S = 0.25  # the user stayed this long on a pass: prepare its neighbours


def _content(data, graph: int, chain: str, index: int, base: Optional[int], side: bool, folded: bool,
             opened: frozenset = frozenset()):
    """Return ("trace", lines, None) or (mode, diff rows, counts) for one view (memoised by
    ``data``; ``opened``: the keys of the diff's layer folds shown open)."""
    if base is None:
        data.layer_folds(graph, chain, index)  # here in the worker: the UI thread reads it memoised
        return "trace", data.trace_lines(graph, chain, index), None
    rows, counts = data.diff_rows(graph, chain, base, index, side, CONTEXT if folded else None, opened)
    return ("side" if side else "unified"), rows, counts


def content_ready(data, graph: int, chain: str, index: int, base: Optional[int], side: bool,
                  folded: bool, opened: frozenset = frozenset()) -> bool:
    """Return whether a view's content is memoised in ``data`` (then showing it needs no worker)."""
    if base is None:
        return data.cached("lines", (graph, chain, index)) and data.cached("layer folds", (graph, chain, index))
    return data.cached("rows", (graph, chain, base, index, side, CONTEXT if folded else None, opened))


class TracePane(Vertical):
    """Title and trace (or diff) of the state last handed to :meth:`show`; ``on_shown(kind)`` is
    called once that state's content is on screen (kind "trace", "unified" or "side")."""

    def __init__(self, on_shown: Callable[[str], None], **kwargs) -> None:
        super().__init__(**kwargs)
        self._on_shown = on_shown
        self.data = None
        self.chain = None  # the overview's Chain of the state shown
        self.numerics = None  # the overview's numerics (trace marks)
        self.state = ViewState()
        self.lines: list = []  # PrintedLine on screen, one per view line (the signature folded or not)
        self.printed_lines: list = []  # every PrintedLine of the pass shown (search reads them)
        self.folds: tuple = ()  # its repeated layers' folds (present.trace_folds.LayerFold)
        self.shown: Optional[FoldedLines] = None  # the trace lines on screen (the block folded or not)
        self.diff_rows: list = []  # the diff's rows on screen (thundervis.diff.render Row or SideRow)
        self._prefetch_timer = None
        self._counts: Optional[dict] = None  # the diff's change counts shown in the title

    def compose(self) -> ComposeResult:
        """The title line and the lines view."""
        yield Static(id="tracetitle")
        yield LinesView(id="lines")

    def _key(self, state: ViewState) -> tuple:
        return content_key(state, self.chain)

    def show(self, data, overview, state: ViewState, fast: bool = False, keep_cursor: bool = False) -> None:
        """Show ``state``'s pass (or diff) of ``data`` (``overview`` its ``ViewOverview``).
        ``fast``: draw the stored text at once (plain lines), then the structured lines (cold start)."""
        self.data, self.state, self._counts = data, state, None
        self.numerics = overview.numerics if overview is not None else None
        self.chain = overview.chain(state.graph, state.chain) if overview is not None and state.graph is not None else None
        view = self.query_one(LinesView)
        self.update_title(None)
        if state.graph is None or state.index is None:
            self.shown, self.lines = None, []
            view.set_trace(text_lines(_no_graph_lines(overview)))
            self._on_shown("none")
            return
        args = (state.graph, state.chain, state.index, diff_base(state, self.chain), state.side_by_side, state.folded,
                state.opened_diff_folds)
        if content_ready(data, *args):  # memoised (prefetched): show it now, no worker round trip
            self._show_content(state, _content(data, *args), keep_cursor)
            return
        if fast and args[3] is None:
            try:
                text = data.pass_text(state.graph, state.chain, state.index)
                self.shown = None
                view.set_trace(text_lines(text.splitlines()), keep_cursor)
            except DataError as e:
                self.app.notify(visible_line(str(e)), severity="error")
            # Paint the stored text first; the worker that prints the trace's structured lines
            # would hold the interpreter while the first frame is drawn.
            self.set_timer(0.05, lambda: self.load(data, state, args, keep_cursor))
            return
        self.load(data, state, args, keep_cursor)

    @work(thread=True, exclusive=True, group="view")
    def load(self, data, state: ViewState, args: tuple, keep_cursor: bool) -> None:
        """Worker: build the lines of a pass or the rows of a diff, then hand them to the UI."""
        try:
            content = _content(data, *args)
        except DataError as e:  # a damaged pass: say so in the view, the rest stays usable
            message = text_lines([f"# this pass cannot be shown: {e}"])
            self.app.call_from_thread(self.app.notify, visible_line(str(e)), severity="error")
            content = ("trace", message, None)
        self.app.call_from_thread(self._show_content, state, content, keep_cursor, data)

    def _show_content(self, state: ViewState, content, keep_cursor: bool, data=None) -> None:
        if self._key(state) != self._key(self.state) or (data is not None and data is not self.data):
            return  # computed for a state the user has left
        kind, rows, counts = content
        view = self.query_one(LinesView)
        self.diff_rows = [] if kind == "trace" else rows
        if kind == "trace":
            self.printed_lines = rows
            self.folds = self._folds(state)
            self.refold(self.state, keep_cursor)  # the state shown now: the same lines, newer settings
        elif kind == "side":
            view.set_side_by_side(rows, keep_cursor)
        else:
            view.set_unified(rows, keep_cursor)
        self._counts = counts
        self.update_title(counts)
        self._schedule_prefetch()
        self._on_shown(kind)

    def _folds(self, state: ViewState) -> tuple:
        try:
            return self.data.layer_folds(state.graph, state.chain, state.index)
        except DataError:  # a pass that cannot be read shows its message, nothing to fold
            return ()

    def refold(self, state: ViewState, keep_cursor: bool = True) -> None:
        """Show the pass's printed lines with the signature block and the layer folds folded as
        ``state`` says."""
        from .numerics_screen import trace_marks
        self.state = state
        self.shown = fold_signature(self.printed_lines, state.signature_folded, self.folds, state.opened_folds)
        self.lines = self.shown.lines
        marks = trace_marks(self.numerics, state.graph, state.chain)
        self.query_one(LinesView).set_trace(self.shown.lines, keep_cursor, marks)

    def restate(self, state: ViewState) -> None:
        """Take ``state``, which shows the same lines as the state shown (say a diff turned on
        for the first pass): redraw the title, prepare the neighbours with its settings."""
        settings = ("diff_from", "side_by_side", "folded", "hide_unchanged")
        changed = any(getattr(state, f) != getattr(self.state, f) for f in settings)
        self.state = state
        if changed:
            self.update_title(self._counts)
            self._schedule_prefetch()

    def diff_fold_at(self, shown: int) -> Optional[str]:
        """Return the key of the diff's layer fold whose row is shown line ``shown``, None for
        another line (or when no diff is shown)."""
        row = self.diff_rows[shown] if 0 <= shown < len(self.diff_rows) else None
        return getattr(row, "fold", "") or None

    def hiding(self, printed: int):
        """Return the closed block (``folding.Block``) that hides printed line ``printed``, None
        when it is on screen."""
        return self.shown.hiding(printed) if self.shown is not None else None

    def printed_index(self, uid: str) -> Optional[int]:
        """Return the first printed line of symbol ``uid`` in the pass shown, None if none."""
        return next((i for i, ln in enumerate(self.printed_lines) if ln.uid == uid), None)

    def move_to_printed(self, printed: int) -> None:
        """Move the cursor to line ``printed`` of the pass's printed lines."""
        self.query_one(LinesView).jump_to(self.shown.shown_index(printed) if self.shown is not None else printed)


    def update_title(self, counts: Optional[dict]) -> None:
        """Draw the title line: pass, diff base and its change counts, or time and symbols."""
        p = next((p for p in self.chain.passes if p.index == self.state.index), None) if self.chain else None
        base = diff_base(self.state, self.chain)
        title = panels.trace_title(p, self.state.diff_from is not None, base, self.state.side_by_side, counts)
        self.query_one("#tracetitle", Static).update(title)

    def _schedule_prefetch(self) -> None:
        """Prepare the neighbouring passes once the user has stayed on this one for a moment
        (work started during a burst of keys would only slow the keys down)."""
        if self._prefetch_timer is not None:
            self._prefetch_timer.stop()
        data, state, chain = self.data, self.state, self.chain
        self._prefetch_timer = self.set_timer(IDLE_S, lambda: self.prefetch(data, state, chain))

    @work(thread=True, exclusive=True, group="prefetch")
    def prefetch(self, data, state: ViewState, chain) -> None:
        """Worker: build the next and previous passes' views (with the same diff setting) while
        the user reads this one, so stepping is a lookup."""
        keys = [p.index for p in visible_passes(state, chain)]
        if state.index not in keys:
            return
        pos = keys.index(state.index)
        for step in (1, -1):
            if 0 <= pos + step < len(keys):
                nxt = keys[pos + step]
                try:
                    _content(data, state.graph, state.chain, nxt, diff_base(state, chain, nxt),
                             state.side_by_side, state.folded, state.opened_diff_folds)
                except DataError:
                    pass


def _no_graph_lines(overview) -> list:
    """The trace pane's lines for a recording without a compiled graph: still being recorded, or
    a run that compiled none, saying how many functions Dynamo ran eagerly (why: the run summary)."""
    from thundervis.present.run_status import NO_GRAPH, NO_GRAPH_YET
    if overview is None or overview.run_status.status == "running":
        return [NO_GRAPH_YET]  # present.run_status's words
    lines = [overview.run_status.no_graph or NO_GRAPH]
    lines += [visible_line(r.text) for r in overview.eager_regions]  # present.eager_regions words each
    n = len(beside_regions(overview.dynamo_fallbacks))  # the rest: recompile limits
    if n:
        lines.append(f"Dynamo ran {n} function{'' if n == 1 else 's'} eagerly: see the run summary")
    return lines
