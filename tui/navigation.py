"""Moving through a recording: pass stepper, chains and graphs, diff settings (a mixin of the app,
which provides ``overview``, ``show_view`` and the stepper widgets)."""
from __future__ import annotations

from typing import Optional

from textual.widgets import OptionList

from .screens import PassPicker


class PassNavigation:
    """The app's pass, chain, graph and diff actions."""

    def go_to_pass(self, index: int) -> None:
        """Show pass ``index`` of the current chain."""
        if index == self.index:
            return
        self.index = index
        ol = self.query_one("#passes", OptionList)
        if index in self._pass_keys:
            pos = self._pass_keys.index(index)
            if ol.highlighted != pos:
                with ol.prevent(OptionList.OptionHighlighted):
                    ol.highlighted = pos
        self.show_view(keep_cursor=True)

    def go_to_chain(self, graph: int, chain: str) -> None:
        """Show the last pass of ``chain`` of ``graph``."""
        if (graph, chain) == (self.graph, self.chain):
            return
        self.graph, self.chain = graph, chain
        c = self.current_chain()
        self.index = c.passes[-1].index if c and c.passes else None
        self.diff_from = None if self.diff_from is None or self.diff_from >= 0 else -1
        self._fill_chains()
        self._fill_passes()
        self.show_view()

    def action_step(self, delta: int) -> None:
        """Go to the next (1) or previous (-1) pass shown in the stepper."""
        keys = getattr(self, "_pass_keys", [])
        if self.index not in keys:
            return
        pos = keys.index(self.index) + delta
        if 0 <= pos < len(keys):
            self.go_to_pass(keys[pos])
        else:
            self.bell()

    def action_next_chain(self) -> None:
        """Show the next chain (forward, backward, ...), wrapping around."""
        keys = getattr(self, "_chain_keys", [])
        if keys:
            i = keys.index((self.graph, self.chain)) if (self.graph, self.chain) in keys else -1
            self.go_to_chain(*keys[(i + 1) % len(keys)])

    def action_next_graph(self) -> None:
        """Show the next compiled graph (same chain kind when it has one)."""
        if not self.overview or not self.overview.graphs:
            return
        ids = [g.id for g in self.overview.graphs]
        nxt = ids[(ids.index(self.graph) + 1) % len(ids)] if self.graph in ids else ids[0]
        g = next(g for g in self.overview.graphs if g.id == nxt)
        kinds = [c.kind for c in g.chains]
        kind = self.chain if self.chain in kinds else (kinds[0] if kinds else None)
        if kind is not None:
            self.go_to_chain(nxt, kind)

    def action_jump(self) -> None:
        """Pick a pass of the current chain and show it."""
        c = self.current_chain()
        if c is None:
            return

        def done(index):  # the picker's answer (None: cancelled)
            if index is not None:
                self.go_to_pass(index)
        self.push_screen(PassPicker("jump to pass", c.passes, self.index), done)

    def action_toggle_unchanged(self) -> None:
        """Hide (or show again) the passes that changed nothing."""
        self.hide_unchanged = not self.hide_unchanged
        self._fill_passes()
        self.notify("passes that changed nothing are " + ("hidden" if self.hide_unchanged else "shown"), timeout=2)
        if self.diff_from == -1:
            self.show_view(keep_cursor=True)

    # -- actions: diff --------------------------------------------------------------------------

    def action_toggle_diff(self) -> None:
        """Diff against the previous pass, or back to the plain trace."""
        self.diff_from = None if self.diff_from is not None else -1
        self.show_view()

    def action_diff_against(self) -> None:
        """Pick the pass to diff against."""
        c = self.current_chain()
        if c is None:
            return

        def done(index):  # the picker's answer (None: cancelled)
            if index is not None:
                self.diff_from = index
                self.show_view()
        self.push_screen(PassPicker("diff against pass", c.passes, self.diff_base()), done)

    def action_toggle_side(self) -> None:
        """Unified or side-by-side diff (turns the diff on)."""
        self.side_by_side = not self.side_by_side
        if self.diff_from is None:
            self.diff_from = -1
        self.show_view(keep_cursor=True)

    def action_toggle_fold(self) -> None:
        """Fold unchanged diff lines to a few around each change, or show them all."""
        self.folded = not self.folded
        if self.diff_from is not None:
            self.show_view()

