"""Moving between the ranks of a group (a mixin of the app, which provides ``data``, ``overview``,
``_set_overview``, ``show_view`` and the top bar): the rank picker, switching the whole UI to another
rank's recording at the same graph, chain and pass, and the rank comparison screen."""
from __future__ import annotations

from typing import Optional

from textual import work

from thundervis.safe_text import visible_line

from .data import DataError
from .group_data import GroupData, GroupInfo
from .rank_panels import group_bar
from .rank_screens import RankComparisonScreen, RankPicker


class RankNavigation:
    """The app's group actions; ``group`` is None when the app shows a single recording."""

    group: Optional[GroupData] = None
    rank: Optional[int] = None
    group_info: Optional[GroupInfo] = None

    def rank_action_allowed(self, action: str) -> Optional[bool]:
        """Return whether a group action can run on the current screen (None: not a group
        action): the picker from the main view or the comparison, the comparison from the main
        view, both only on a group."""
        if action not in ("pick_rank", "compare_ranks"):
            return None
        if self.group is None:
            return False
        if len(self.screen_stack) == 1:
            return True
        return action == "pick_rank" and isinstance(self.screen, RankComparisonScreen)

    def group_bar(self):
        """Return the top bar's group part (``rich.text.Text``), None when not a group."""
        if self.group is None:
            return None
        return group_bar(self.group_info, self.group.name(), self.rank)

    @work(thread=True, exclusive=True, group="groupinfo")
    def load_group_info(self) -> None:
        """Worker: read the group's summary (every rank's status and variant) for the top bar."""
        try:
            info = self.group.info(fresh=True)
        except DataError as e:
            self.call_from_thread(self.notify, visible_line(str(e)), severity="error")
            return
        self.call_from_thread(self._set_group_info, info)

    def _set_group_info(self, info: GroupInfo) -> None:
        self.group_info = info
        if self.overview is not None:
            self._update_topbar()

    def action_pick_rank(self) -> None:
        """Open the rank picker; the rank chosen is shown at the same graph, chain and pass."""
        if self.group is None:
            return

        def done(rank):  # the picker's answer (None: cancelled)
            if rank is not None and rank != self.rank:
                self.switch_rank(rank)
        self.push_screen(RankPicker(self.group, self.rank), done)

    def switch_rank(self, rank: int, position: Optional[tuple] = None) -> None:
        """Show rank ``rank``'s recording (opened in a worker), keeping the position or going to
        ``position`` (graph, chain, pass index) when given."""
        self.loaded = False
        self.open_rank(rank, position)

    @work(thread=True, exclusive=True, group="rank")
    def open_rank(self, rank: int, position: Optional[tuple] = None) -> None:
        """Worker: open the rank's recording and read its overview."""
        try:
            data = self.group.rank_data(rank)
            ov = data.overview()
        except DataError as e:
            self.call_from_thread(self._rank_failed, rank, str(e))
            return
        self.call_from_thread(self._rank_opened, rank, data, ov, position)

    def _rank_failed(self, rank: int, why: str) -> None:
        self.loaded = True
        self.notify(f"rank {rank} cannot be shown: {visible_line(why)}", severity="error")

    def _rank_opened(self, rank: int, data, ov, position: Optional[tuple] = None) -> None:
        # Everything shown so far belongs to the old rank: the new rank's views are built afresh
        # (the old recording stays open in the group: a worker may still be reading it).
        self.data, self.rank = data, rank
        if position is not None:
            (self.graph, self.chain, self.index), self.diff_from = position, None
        self.lines, self.selected_uid, self.selected_source = [], None, None
        self._set_overview(ov)
        self.show_view(keep_cursor=True)
        self.load_group_info()

    def action_compare_ranks(self) -> None:
        """Open the rank comparison (identical or not, variants, differing passes, kernel skew)."""
        if self.group is not None:
            self.push_screen(RankComparisonScreen(self.group))
