"""The group a :class:`ThundervisApp` shows one rank of (a focused helper the app holds): the
group's summary for the top bar, the rank picker, opening another rank's recording in a worker and
the rank comparison screen. It changes nothing on the app: results go to the callbacks given."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from thundervis.safe_text import visible_line

from .data import DataError
from .group_data import GroupData, GroupInfo
from .rank_panels import group_bar
from .view_state import ViewState

GROUP_ACTIONS = ("pick_rank", "compare_ranks")


class RankSwitcher:
    """Rank actions of ``app`` (a Textual ``App``) over ``group`` (a ``GroupData``, None for a
    single recording); ``info`` is the group's summary once read."""

    def __init__(self, app, group: Optional[GroupData]) -> None:
        self.app, self.group = app, group
        self.info: Optional[GroupInfo] = None

    def action_allowed(self, action: str) -> Optional[bool]:
        """Return whether a group action can run on the app's current screen (None: not a group
        action): the picker from the main view or the comparison, the comparison from the main
        view, both only on a group."""
        if action not in GROUP_ACTIONS:
            return None
        if self.group is None:
            return False
        if len(self.app.screen_stack) == 1:
            return True
        from .rank_screens import RankComparisonScreen
        return action == "pick_rank" and isinstance(self.app.screen, RankComparisonScreen)

    def bar(self, rank: Optional[int]):
        """Return the top bar's group part (``rich.text.Text``), None when not a group."""
        return None if self.group is None else group_bar(self.info, self.group.name(), rank)

    def load_info(self, on_info: Callable[[], None]) -> None:
        """Read the group's summary (every rank's status and variant) in a worker, then call
        ``on_info()`` on the UI thread."""
        def read() -> None:
            try:
                info = self.group.info(fresh=True)
            except DataError as e:
                self.app.call_from_thread(self.app.notify, visible_line(str(e)), severity="error")
                return
            self.app.call_from_thread(self._set_info, info, on_info)
        self.app.run_worker(read, thread=True, exclusive=True, group="groupinfo")

    def _set_info(self, info: GroupInfo, on_info: Callable[[], None]) -> None:
        self.info = info
        on_info()

    def pick(self, rank: Optional[int], on_pick: Callable[[int], None]) -> None:
        """Open the rank picker; ``on_pick(rank)`` when another rank than ``rank`` is chosen."""
        def done(chosen):  # the picker's answer (None: cancelled)
            if chosen is not None and chosen != rank:
                on_pick(chosen)
        from .rank_screens import RankPicker
        self.app.push_screen(RankPicker(self.group, rank), done)

    def open(self, rank: int, state: ViewState, position: Optional[tuple], on_opened: Callable,
             on_failed: Callable[[int, str], None]) -> None:
        """Open rank ``rank``'s recording and read its overview in a worker; then, on the UI
        thread, ``on_opened(data, overview, state)`` with ``state`` moved to the rank (and to
        ``position``, (graph, chain, pass index), when given), or ``on_failed(rank, why)``."""
        new = replace(state, rank=rank, selected_uid=None)
        if position is not None:
            graph, chain, index = position
            new = replace(new, graph=graph, chain=chain, index=index, diff_from=None)

        def read() -> None:
            try:
                data = self.group.rank_data(rank)
                ov = data.overview()
            except DataError as e:
                self.app.call_from_thread(on_failed, rank, str(e))
                return
            self.app.call_from_thread(on_opened, data, ov, new)
        self.app.run_worker(read, thread=True, exclusive=True, group="rank")

    def compare(self) -> None:
        """Open the rank comparison (identical or not, variants, differing passes, kernel skew)."""
        if self.group is not None:
            from .rank_screens import RankComparisonScreen
            self.app.push_screen(RankComparisonScreen(self.group))
