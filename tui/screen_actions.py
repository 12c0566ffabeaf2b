"""The main view's actions that open another screen or jump somewhere: the kernels table, numerics
and bisect, the run, communication, help, search, the Source screen (and back to a line's ops),
and the editor. A mixin of :class:`tui.app.ThundervisApp`, which holds the state they read
(``overview``, ``state``, ``data``, ``trace``) and shows what they choose.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from thundervis.present.default_view import search_target

from . import navigation
from .data import SearchHit
from .lines_view import LinesView
from .view_state import content_key

# The screens are imported when first opened: the first paint waits for every module imported here.
if TYPE_CHECKING:
    from .source_screen import SourceJump


class ScreenActions:
    """Actions of the main view that open screens (see the module doc)."""

    def action_kernels(self, kernel_id: Optional[int] = None) -> None:
        """Open the kernels table (on ``kernel_id`` when given)."""
        from .screens import KernelsScreen
        if self.overview is not None:
            self.push_screen(KernelsScreen(self.data, self.overview, kernel_id))

    def action_numerics(self) -> None:
        """Open the numerics screen: kernels by verdict."""
        if self.overview is not None:
            from .numerics_screen import NumericsScreen
            self.push_screen(NumericsScreen(self.data, self.overview, self.overview.numerics))

    def action_memory(self) -> None:
        """Open the memory screen: saved tensors, peak, timeline."""
        from thundervis.safe_text import visible_line

        from .data import DataError
        from .memory_screen import MemoryScreen
        try:
            report = self.data.memory()
        except DataError as e:  # damaged ledger rows: one sentence, the view stays
            self.notify(visible_line(str(e)), severity="error")
            return
        self.push_screen(MemoryScreen(report))

    def action_bisect(self) -> None:
        """Bisect the chain shown (every pass on the same inputs, in a worker)."""
        if self.overview is not None and self.state.graph is not None and self.state.chain:
            from .numerics_screen import BisectScreen
            self.push_screen(BisectScreen(self.data, self.state.graph, self.state.chain))

    def action_run_info(self) -> None:
        """Show the run: status, eager chains, fallbacks, traceback."""
        from .screens import RunScreen
        if self.overview is not None:
            self.push_screen(RunScreen(self.overview))

    def action_communication(self) -> None:
        """Show the run's collectives: traced into the graphs, and run between them per place."""
        from .comm_screen import CommunicationScreen
        if self.overview is not None:
            self.push_screen(CommunicationScreen(self.data))

    def action_help(self) -> None:
        """Show every key binding."""
        from .screens import HelpScreen
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_search(self) -> None:
        """Search symbols and source lines of the pass shown, and kernel names."""
        from . import jumps
        if self.overview is not None:
            printed = self.trace.printed_lines if self.trace.lines else []
            jumps.open_search(self, self.data, self.overview, self.state, printed, self._search_hit)

    def _search_hit(self, hit: SearchHit) -> None:
        if hit.kind == "kernel":
            self.action_kernels(hit.kernel_id)
            return
        # the hit is a line of the pass searched: present's search_target says which view shows it
        target = search_target(self.overview.graphs, self.state.graph, self.state.chain, self.state.index)
        new = self.state if target is None else replace(self.state, index=target.pass_index, diff_from=None)
        if new != self.state:  # e.g. a diff was shown: the line appears once the trace is loaded
            self._pending_line = hit.line
            self.state = new
        else:
            self.select_printed_line(hit.line or 0)
            self.query_one(LinesView).focus()

    def action_source(self) -> None:
        """Open the Source screen on the selected line's file (else the run's script); enter there
        comes back to that line's ops in the final pass of their chain."""
        from . import jumps
        if self.overview is not None:
            jumps.open_source(self, self.data, self.selected_source, self.show_ops)

    def show_ops(self, jump: SourceJump) -> None:
        """Show the pass present's ``search_target`` opens for ``jump``'s chain (its final pass)
        with the cursor on its first op (``to_kernel``: the kernels table on its kernel)."""
        if jump.to_kernel and jump.kernel_id is not None:
            self.action_kernels(jump.kernel_id)
            return
        target = search_target(self.overview.graphs, jump.graph, jump.chain) if self.overview else None
        if target is None:
            return
        c = self.overview.chain(jump.graph, jump.chain)
        new = replace(navigation.to_chain(self.state, self.overview, jump.graph, jump.chain),
                      index=target.pass_index, diff_from=None)
        if new == self.state and self.loaded:
            self.select_uid(jump.uids[0])
            return
        self._pending_uid = jump.uids[0]
        if content_key(new, c) == content_key(self.state, self.current_chain()):
            self.show_view()  # the same view, still loading: show it again to select the symbol
        self.state = new

    def action_edit(self) -> None:
        """Open the selected line's source in ``$EDITOR`` (``+LINE FILE``), then come back."""
        from .editor import open_in_editor
        open_in_editor(self, self.selected_source)
