"""The thundervis terminal UI: chains and passes on the left, the trace or a diff in the middle,
the details of the selected line on the right (below it on a narrow terminal).

What is shown is one :class:`ViewState` in the reactive ``state``, replaced whole on every change;
``watch_state`` repaints what changed. Heavy work (loading and validating traces, diffing, lineage,
re-runs) runs in thread workers; the UI thread only draws. A timer polls the recording's revision
so a live run's passes appear as they are recorded.
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Iterable, Optional

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static

from thundervis.present.overview import ViewOverview
from thundervis.safe_text import visible, visible_line

from . import navigation, panels
from .data import DataError, RecordingData
from .details_pane import DetailsPane
from .lines_view import LinesView
from .palette import bindings, palette_entries
from .rank_navigation import RankSwitcher
from .requests import OpenKernels, ShowRank
from .screen_actions import ScreenActions
from .stepper import NARROW, Stepper
from .trace_pane import TracePane
from .view_state import ViewState, content_key, diff_base, keeps_cursor, settle, visible_passes

SHORT = 34  # below NARROW columns and this many rows the details show only when asked (i)
# Worker threads run Python (loading traces, diffing, lineage) while the UI thread waits on the
# terminal; a short GIL switch interval lets the UI thread back in quickly when a key arrives.
SWITCH_INTERVAL_S = 0.0005


class ThundervisApp(ScreenActions, App):
    """Browse one recording (a :class:`tui.data.RecordingData`), or one rank at a time of a group
    (``group``, a :class:`tui.group_data.GroupData`, showing rank ``rank`` first)."""

    TITLE = "thundervis"
    ENABLE_COMMAND_PALETTE = True

    # The layout, shipped as package data. An absolute path: Textual reads a relative one beside the
    # module of the running app's class, which for a subclass (the live view) is another folder.
    CSS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.tcss")
    BINDINGS = bindings()

    # Actions that act on the pass view; other screens (kernels, help ...) switch them off.
    MAIN_ONLY = {"step", "toggle", "diff_against", "next_chain", "next_graph", "jump", "edit", "toggle_details", "search", "kernels", "run_info",
                 "communication", "source"}

    state: var[ViewState] = var(ViewState())  # what is shown; replaced whole, never mutated

    def check_action(self, action: str, parameters) -> Optional[bool]:
        """Pass-view actions only run (and show in the footer) on the main screen; rank actions
        only on a group."""
        allowed = self.ranks.action_allowed(action)
        if allowed is not None:
            return allowed
        if action in self.MAIN_ONLY and len(self.screen_stack) > 1:
            return False
        return True

    def __init__(self, data: RecordingData, poll_s: float = 1.0, group=None, rank: Optional[int] = None):
        super().__init__()
        self.data = data
        self.group = group
        self.ranks = RankSwitcher(self, group)
        self.poll_s = poll_s
        self.overview: Optional[ViewOverview] = None
        self.set_reactive(ThundervisApp.state, ViewState(rank=rank))
        self._pending_line: Optional[int] = None  # a search hit to select once the trace is shown
        self._pending_uid: Optional[str] = None  # a symbol to select once the trace is shown (Source)
        self.loaded = False  # the current view's content is on screen (tests and benchmarks wait on it)

    # -- what tests, screens and the palette read -----------------------------------------------

    @property
    def group_info(self):
        """The group's summary (``GroupInfo``) once read; None before, or for one recording."""
        return self.ranks.info

    @property
    def trace(self) -> TracePane:
        """The middle pane."""
        return self.query_one(TracePane)

    def current_chain(self):
        """Return the chain shown (a ``recording.model.Chain``) or None."""
        if self.overview is None or self.state.graph is None:
            return None
        return self.overview.chain(self.state.graph, self.state.chain)

    def visible_passes(self) -> list:
        """Return the passes of the current chain shown in the stepper."""
        return visible_passes(self.state, self.current_chain())

    def diff_base(self) -> Optional[int]:
        """Return the pass the diff compares against (None when no diff is shown)."""
        return diff_base(self.state, self.current_chain())

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
            yield Stepper(id="left")
            yield TracePane(self._trace_shown, id="center")
            yield DetailsPane(id="details")
        yield Footer()

    def on_mount(self) -> None:
        """Read the overview, show the first view, start polling."""
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._apply_size(self.size.width, self.size.height)
        self.refresh_overview(first=True)
        if self.group is not None:
            self.ranks.load_info(self._update_topbar)
        self.query_one(LinesView).focus()
        if self.poll_s:
            self.set_interval(self.poll_s, self.poll)

    def on_unmount(self) -> None:
        """Give the interpreter its usual switch interval back."""
        sys.setswitchinterval(getattr(self, "_switch_interval", 0.005))

    def on_resize(self, event) -> None:
        """Narrow or short terminals rearrange the panes."""
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        self.screen.set_class(width < NARROW, "-narrow")
        # A small terminal keeps its rows for the trace; `i` shows the details under it.
        self.screen.set_class(width < NARROW and height < SHORT, "-short")
        self.query_one(Stepper).fit(width, height)

    # -- the view state -------------------------------------------------------------------------

    def watch_state(self, old: ViewState, new: ViewState) -> None:
        """Repaint what the change from ``old`` to ``new`` touches: the lists, the trace or diff
        (in a worker), the fold of the signature block, the details pane."""
        if self.overview is None:
            return
        stepper = self.query_one(Stepper)
        if (old.rank, old.graph, old.chain) != (new.rank, new.graph, new.chain):
            stepper.fill_chains(self.overview, new)
        if (old.rank, old.graph, old.chain, old.hide_unchanged) != (new.rank, new.graph, new.chain, new.hide_unchanged):
            stepper.fill_passes(self.current_chain(), new)
        elif old.index != new.index:
            stepper.highlight(new)
        chain = self.current_chain()
        if content_key(old, chain) != content_key(new, chain):
            self.show_view(keep_cursor=keeps_cursor(old, new))
        else:  # the same lines: the title and the neighbours to prepare may still differ
            if (old.signature_folded, old.opened_folds) != (new.signature_folded, new.opened_folds):
                self.trace.refold(new)
            self.trace.restate(new)
        if old.details_hidden != new.details_hidden:
            self.query_one("#details").set_class(new.details_hidden, "-hidden")
            self.query_one(Stepper).fit()
        if old.selected_uid != new.selected_uid:
            self._selection_changed(new)

    def show_view(self, fast: bool = False, keep_cursor: bool = False) -> None:
        """Show the current state's pass (or its diff). ``fast``: draw the stored text at once
        (plain lines), then load the trace's structured lines in a worker (cold start)."""
        self.loaded = False
        if self.state.graph is None and self.overview is not None and self.overview.run.traceback:
            self.query_one(DetailsPane).show_text(panels.run_summary(self.overview))
        self.trace.show(self.data, self.overview, self.state, fast, keep_cursor)

    def _trace_shown(self, kind: str) -> None:
        """The trace pane shows the current state: select what a search or a jump asked for."""
        if kind == "trace" and self._pending_line is not None:
            line, self._pending_line = self._pending_line, None
            self.select_printed_line(line)
        if kind == "trace" and self._pending_uid is not None:
            uid, self._pending_uid = self._pending_uid, None
            self.select_uid(uid)
        self.loaded = True

    def go_to_pass(self, index: int) -> None:
        """Show pass ``index`` of the current chain."""
        self.state = replace(self.state, index=index)

    def go_to_chain(self, graph: int, chain: str) -> None:
        """Show the last pass of ``chain`` of ``graph``."""
        self.state = navigation.to_chain(self.state, self.overview, graph, chain)

    def select_printed_line(self, printed: int) -> None:
        """Move the cursor to line ``printed`` of the pass's printed lines (a search hit),
        opening the signature block or the layer fold first when the line is inside it."""
        block = self.trace.hiding(printed)
        if block is not None:
            self.state = navigation.opened(self.state, block.key)
        self.trace.move_to_printed(printed)

    def select_uid(self, uid: str) -> None:
        """Move the cursor to the first line of symbol ``uid`` in the pass shown (opening the fold
        that hides it) and focus the trace."""
        printed = self.trace.printed_index(uid)
        if printed is not None:
            self.select_printed_line(printed)
            self.query_one(LinesView).focus()

    @on(LinesView.Activated)
    def _line_activated(self, event: LinesView.Activated) -> None:
        """Enter or a click on a fold line opens or closes its block (the signature, a layer fold;
        in a diff, a layer fold's row)."""
        if event.view.id != "lines":
            return
        if event.view.mode in ("unified", "side"):
            key = self.trace.diff_fold_at(event.index)
            if key is not None:
                self.state = navigation.toggled_diff_fold(self.state, key)
            return
        shown = self.trace.shown
        block = shown.block_at(event.index) if shown is not None else None
        if event.view.mode == "trace" and block is not None:
            self.state = navigation.toggled_block(self.state, block.key)

    # -- overview -------------------------------------------------------------------------------

    def refresh_overview(self, first: bool = False) -> None:
        """Read the overview and redraw the chain list, the stepper and the top bar."""
        try:
            ov = self.data.overview()
        except DataError as e:
            self.notify(visible_line(str(e)), severity="error")
            return
        self._set_overview(ov, first)

    def _set_overview(self, ov: ViewOverview, first: bool = False, state: Optional[ViewState] = None) -> None:
        """Take ``ov`` as the overview and ``state`` (default the current one) settled on it;
        redraw the lists and bars (the first time, show the view fast)."""
        self.overview = ov
        new = settle(state or self.state, ov)
        if first:
            self.set_reactive(ThundervisApp.state, new)
        else:
            self.state = new
        stepper = self.query_one(Stepper)
        stepper.fill_chains(ov, self.state)
        stepper.fill_passes(self.current_chain(), self.state)
        self._update_topbar()
        self._update_banner()
        if first:
            self.show_view(fast=True)

    def _update_topbar(self) -> None:
        if self.overview is not None:
            self.query_one("#topbar", Static).update(panels.topbar(self.overview, self.ranks.bar(self.state.rank)))

    def _update_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        text = panels.banner(self.overview.run)
        if banner.has_class("-shown") != (text is not None):
            banner.set_class(text is not None, "-shown")
            self.query_one(Stepper).fit()  # the banner's rows come out of the band and the details
        banner.update(text or "")

    # -- selection and details ------------------------------------------------------------------

    @on(LinesView.CursorMoved)
    def _cursor_moved(self, event: LinesView.CursorMoved) -> None:
        if event.uid == self.state.selected_uid:
            self._selection_changed(self.state)  # the same symbol on another line or pass
        self.state = replace(self.state, selected_uid=event.uid)

    def _selection_changed(self, state: ViewState) -> None:
        self.query_one(DetailsPane).select(self.data, self.overview, state)

    @property
    def selected_source(self) -> Optional[tuple[str, int]]:
        """The selected symbol's source (file, line), None when it has none."""
        return self.query_one(DetailsPane).source

    @on(OptionList.OptionSelected, "#passes")
    @on(OptionList.OptionHighlighted, "#passes")
    def _pass_chosen(self, event) -> None:
        keys = self.query_one(Stepper).pass_keys
        if 0 <= event.option_index < len(keys) and keys[event.option_index] != self.state.index:
            self.go_to_pass(keys[event.option_index])

    @on(OptionList.OptionSelected, "#chains")
    def _chain_chosen(self, event) -> None:
        keys = self.query_one(Stepper).chain_keys
        if 0 <= event.option_index < len(keys):
            self.go_to_chain(*keys[event.option_index])

    # -- actions: moving ------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        """Go to the next (1) or previous (-1) pass shown in the stepper."""
        new = navigation.stepped(self.state, self.current_chain(), delta)
        if new is None:
            self.bell()
        else:
            self.state = new

    def action_next_chain(self) -> None:
        """Show the next chain (forward, backward, ...), wrapping around."""
        self.state = navigation.next_chain(self.state, self.overview, self.query_one(Stepper).chain_keys)

    def action_next_graph(self) -> None:
        """Show the next compiled graph (same chain kind when it has one)."""
        self.state = navigation.next_graph(self.state, self.overview)

    def _pick_pass(self, title: str, current: Optional[int], field: str) -> None:
        """Open the pass picker on the current chain; set ``field`` of the state to the pass chosen."""
        from .screens import PassPicker
        c = self.current_chain()
        if c is not None:
            def done(index):  # the picker's answer (None: cancelled)
                if index is not None:
                    self.state = replace(self.state, **{field: index})
            self.push_screen(PassPicker(title, c.passes, current), done)

    def action_jump(self) -> None:
        """Pick a pass of the current chain and show it."""
        self._pick_pass("jump to pass", self.state.index, "index")

    def action_diff_against(self) -> None:
        """Pick the pass to diff against."""
        self._pick_pass("diff against pass", self.diff_base(), "diff_from")

    def action_toggle(self, setting: str) -> None:
        """Flip one setting of the view (see ``navigation.toggled``); ``details`` on a short
        terminal shows the details pane under the trace for a while instead."""
        if setting == "details" and self.screen.has_class("-short"):
            self.query_one("#details").toggle_class("-shown")
            self.query_one(Stepper).fit()  # the details take their rows from the band, not the trace
            return
        self.state = navigation.toggled(self.state, setting)
        if setting == "unchanged":
            self.notify("passes that changed nothing are " + ("hidden" if self.state.hide_unchanged else "shown"), timeout=2)

    # -- actions: ranks of a group --------------------------------------------------------------

    def action_pick_rank(self) -> None:
        """Open the rank picker; the rank chosen is shown at the same graph, chain and pass."""
        if self.group is not None:
            self.ranks.pick(self.state.rank, self.switch_rank)

    def action_compare_ranks(self) -> None:
        """Open the rank comparison (identical or not, variants, differing passes, kernel skew)."""
        self.ranks.compare()

    def on_open_kernels(self, request: OpenKernels) -> None:
        self.action_kernels(request.kernel_id)

    def on_show_rank(self, request: ShowRank) -> None:
        self.switch_rank(request.rank, request.position)

    def switch_rank(self, rank: int, position: Optional[tuple] = None) -> None:
        """Show rank ``rank``'s recording (opened in a worker), keeping the position or going to
        ``position`` (graph, chain, pass index) when given."""
        self.loaded = False
        self.ranks.open(rank, self.state, position, self._rank_opened, self._rank_failed)

    def _rank_opened(self, data, ov: ViewOverview, state: ViewState) -> None:
        # Everything shown so far belongs to the old rank: the new rank's views are built afresh
        # (the old recording stays open in the group: a worker may still be reading it).
        self.data = data
        self._set_overview(ov, state=state)
        self.ranks.load_info(self._update_topbar)

    def _rank_failed(self, rank: int, why: str) -> None:
        self.loaded = True
        self.notify(f"rank {rank} cannot be shown: {visible_line(why)}", severity="error")

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
            self.ranks.load_info(self._update_topbar)
        self._set_overview(ov, state=navigation.following(self.state, self.current_chain(), ov))

    # -- command palette ------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action of the app, plus Textual's own commands."""
        yield from super().get_system_commands(screen)
        for title, help_text, callback in palette_entries(self):
            yield SystemCommand(title, help_text, callback)
