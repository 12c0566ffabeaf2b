"""The group screens: the rank picker, the rank comparison (variants, differing passes, kernel
timing skew) and the cross-rank diff of one pass. They read the group through
:class:`tui.group_data.GroupData`, heavy work in thread workers."""
from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from thundervis.present.variants import first_rank_of, variant_labels
from thundervis.recording import chain_position
from thundervis.safe_text import visible_line

from . import rank_panels
from .base_screen import DetailScreen, detail_bindings
from .data import DataError
from .group_data import GroupData, RankRow
from .lines_view import LinesView
from .requests import ShowRank
from thundervis.present.units import plural

CONTEXT = 3  # unchanged lines kept around each change when a diff is folded
TIMES_BATCH = 16  # rank picker: redraw the rows after reading this many ranks' times


def _pass_order(d) -> tuple:
    """Sort key of a differing pass: graph, chain in compile order (forward before backward), pass."""
    return d.graph, chain_position(d.chain), d.chain, d.index


class RankPicker(ModalScreen):
    """Every rank of the group with its status, variant, host, compile and step time and what is
    missing; enter switches the UI to that rank (``dismiss(rank)``)."""

    BINDINGS = [Binding("escape,ctrl+r", "dismiss(None)", "Close")]

    def __init__(self, group: GroupData, current: int):
        super().__init__()
        self.group = group
        self.current = current
        self.rows: list[RankRow] = []
        self.loaded = False  # every rank's times are read (tests wait on it)

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        with Vertical():
            yield Static(Text("switch to rank (reading the ranks …)", style=Style(bold=True)), id="ranktitle")
            yield Static(rank_panels.RANK_HEADER, id="rankhead")
            yield OptionList(id="ranks")

    def on_mount(self) -> None:
        """Read the ranks in a worker."""
        self.query_one(OptionList).focus()
        self.load_rows()

    @work(thread=True, exclusive=True, group="ranks")
    def load_rows(self) -> None:
        """Worker: the group's ranks first, then each rank's compile and step time."""
        from dataclasses import replace

        from textual.worker import get_current_worker
        worker = get_current_worker()
        try:
            rows = self.group.rank_rows(fresh=True)
        except DataError as e:
            self.app.call_from_thread(self.notify, visible_line(str(e)), severity="error")
            return
        self.app.call_from_thread(self._show_rows, list(rows), False)
        for n, row in enumerate(rows):
            if worker.is_cancelled:  # the picker was closed
                return
            if row.recorded and not (row.problem and row.status is None):
                try:
                    compile_ms, step_ms = self.group.rank_times(row.rank)
                    rows[n] = replace(row, compile_ms=compile_ms, step_ms=step_ms)
                except DataError:
                    pass
            if (n + 1) % TIMES_BATCH == 0:
                self.app.call_from_thread(self._show_rows, list(rows), False)
        self.app.call_from_thread(self._show_rows, list(rows), True)

    def _show_rows(self, rows: list[RankRow], done: bool) -> None:
        if not self.is_attached:  # closed while the worker read the ranks
            return
        ol = self.query_one(OptionList)
        if len(rows) == len(self.rows):
            for i, row in enumerate(rows):
                if row != self.rows[i]:
                    ol.replace_option_prompt_at_index(i, rank_panels.rank_row(row, self.current))
        else:
            ol.clear_options()
            ol.add_options([Option(rank_panels.rank_row(r, self.current), disabled=not self._can_open(r))
                            for r in rows])
            for i, r in enumerate(rows):
                if r.rank == self.current:
                    ol.highlighted = i
        self.rows = rows
        title = f"switch to rank: {plural(len(rows), 'rank')}"
        self.query_one("#ranktitle", Static).update(Text(title + ("" if done else " (reading times …)"),
                                                         style=Style(bold=True)))
        self.loaded = done

    @staticmethod
    def _can_open(row: RankRow) -> bool:
        return row.recorded and row.status is not None

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.rows[event.option_index].rank)


class RankComparisonScreen(Screen):
    """Did the ranks compile identical traces? The variants and their ranks, every pass where a
    variant differs from the reference rank (enter: its cross-rank diff), and the per-kernel timing
    skew across ranks."""

    BINDINGS = detail_bindings("escape,equals_sign")

    def __init__(self, group: GroupData):
        super().__init__()
        self.group = group
        self.comparison = None
        self._keys: list = []  # per option: (reference rank, variant's first rank, PassDifference) or None
        self.loaded = False

    def compose(self) -> ComposeResult:
        """Build the screen's widgets."""
        yield Static(Text("comparing the ranks' traces …", style=Style(italic=True)), id="csummary")
        yield OptionList(id="cdiffs")
        with VerticalScroll(id="cskew"):
            yield Static(id="cskewtext")
        yield Footer()

    def on_mount(self) -> None:
        """Start the comparison in a worker (it reads every variant's traces)."""
        self.query_one(OptionList).focus()
        self.load_comparison()

    @work(thread=True, exclusive=True, group="compare")
    def load_comparison(self) -> None:
        """Worker: compare the ranks, then show the result."""
        try:
            comp = self.group.compare()
            labels = variant_labels({v.fingerprint: v.ranks for v in comp.variants})
        except DataError as e:
            self.app.call_from_thread(self._failed, str(e))
            return
        self.app.call_from_thread(self._show, comp, labels)

    def _failed(self, why: str) -> None:
        if not self.is_attached:
            return
        self.query_one("#csummary", Static).update(Text(f"the ranks could not be compared: {visible_line(why)}",
                                                        style=Style(color=rank_panels.BAD)))
        self.loaded = True

    def _show(self, comp, labels: dict) -> None:
        if not self.is_attached:  # left before the comparison was done
            return
        self.comparison = comp
        self.query_one("#csummary", Static).update(rank_panels.comparison_summary(comp, self.group.name()))
        ol = self.query_one(OptionList)
        ol.clear_options()
        self._keys = []
        options = []
        for v in comp.variants:
            reference = comp.reference in v.ranks
            options.append(Option(rank_panels.variant_row(labels.get(v.fingerprint, "?"), v, reference),
                                  disabled=True))
            self._keys.append(None)
            for d in sorted(v.differences, key=_pass_order)[:500]:
                options.append(Option(rank_panels.difference_row(d)))
                self._keys.append((comp.reference, first_rank_of(v.ranks), d))  # present.variants
        ol.add_options(options)
        first = next((i for i, k in enumerate(self._keys) if k is not None), None)
        if first is not None:
            ol.highlighted = first
        self.query_one("#cskewtext", Static).update(rank_panels.skew_table(comp))
        self.loaded = True

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self._open(event.option_index)

    def _open(self, index: int) -> None:
        key = self._keys[index] if 0 <= index < len(self._keys) else None
        if key is None:
            return
        ref, rank, d = key
        if d.only:  # nothing to diff: show the pass on the rank that has it
            where = ref if d.only == "reference" else rank
            self.app.pop_screen()
            self.app.post_message(ShowRank(where, (d.graph, d.chain, d.index)))
            self.app.notify(f"graph {d.graph} {visible_line(d.chain)} pass {d.index} exists on rank {where} only")
            return
        self.app.push_screen(RankDiffScreen(self.group, ref, rank, d.graph, d.chain, d.index, d.name))


class RankDiffScreen(DetailScreen):
    """The diff of one pass from the reference rank to a variant's rank, unified or side by side
    (the same rows and view as the pass diffs)."""

    TITLE_ID = "dtitle"
    BINDINGS = detail_bindings("escape", Binding("s", "toggle_side", "Side"), Binding("f", "toggle_fold", "Fold"))

    def __init__(self, group: GroupData, ref_rank: int, rank: int, graph: int, chain: str, index: int,
                 name: str, side: bool = False):
        super().__init__()
        self.group = group
        self.ref_rank, self.rank = ref_rank, rank
        self.graph, self.chain, self.index, self.pass_name = graph, chain, index, name
        self.side_by_side = side
        self.folded = True
        self.loaded = False
        self._token = 0

    def compose_body(self) -> ComposeResult:
        """The diff's lines."""
        yield LinesView(id="ranklines")

    def on_mount(self) -> None:
        """Show the diff."""
        self.query_one(LinesView).focus()
        self.show()

    def show(self) -> None:
        """Build the rows in a worker and show them."""
        self._token += 1
        self.loaded = False
        self._title(None)
        self.load_rows(self._token, self.side_by_side, CONTEXT if self.folded else None)

    @work(thread=True, exclusive=True, group="rankdiff")
    def load_rows(self, token: int, side: bool, context: Optional[int]) -> None:
        """Worker: the diff rows of the pass between the two ranks."""
        try:
            rows, counts = self.group.rank_diff_rows(self.ref_rank, self.rank, self.graph, self.chain, self.index,
                                                     side, context)
        except DataError as e:
            self.app.call_from_thread(self._error, token, str(e))
            return
        self.app.call_from_thread(self._show_rows, token, side, rows, counts)

    def _show_rows(self, token: int, side: bool, rows, counts) -> None:
        if token != self._token or not self.is_attached:
            return
        view = self.query_one(LinesView)
        if side:
            view.set_side_by_side(rows, True)
        else:
            view.set_unified(rows, True)
        self._title(counts)
        self.loaded = True

    def _error(self, token: int, why: str) -> None:
        if token == self._token and self.is_attached:
            self.set_title(Text(f"this pass cannot be diffed: {visible_line(why)}",
                                style=Style(color=rank_panels.BAD)))
            self.loaded = True

    def _title(self, counts: Optional[dict]) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"g{self.graph} {visible_line(self.chain)} ", style=Style(dim=True))
        t.append(f"{self.index} {visible_line(self.pass_name)}", style=Style(bold=True, color="#e5c07b"))
        t.append(f"  rank {self.ref_rank} vs rank {self.rank}", style=Style(color=rank_panels.ACCENT, bold=True))
        t.append(" side by side" if self.side_by_side else "", style=Style(color=rank_panels.ACCENT))
        if counts is not None:
            bits = [f"{v} {k}" for k, v in counts.items() if v and k != "unchanged"]
            t.append(("  " + ", ".join(bits)) if bits else "  no change", style=Style(dim=True))
        self.set_title(t)

    def on_lines_view_cursor_moved(self, event: LinesView.CursorMoved) -> None:
        """Keep the cursor to this screen (the main view's details follow its own trace only)."""
        event.stop()

    def action_toggle_side(self) -> None:
        """Unified or side-by-side diff."""
        self.side_by_side = not self.side_by_side
        self.show()

    def action_toggle_fold(self) -> None:
        """Fold unchanged lines to a few around each change, or show them all."""
        self.folded = not self.folded
        self.show()
