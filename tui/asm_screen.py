"""The asm view of one kernel (``a`` on the kernels screen): its machine code per GPU target and
stage (TTIR, TTGIR, LLVM IR, PTX, SASS tabs), beside the compiled Triton source.

Selecting a Triton source line highlights the instructions generated for it (strong) and for its
symbol (light); ``u`` / ``U`` step through the kernel's symbols; selecting an instruction shows its symbol, op and user source line, and marks its
Triton line. Rows come from ``thundervis.present.asm`` through ``tui.data``; recorded stage text is
data, drawn as ``Text`` (control characters made visible), never as markup.
"""
from __future__ import annotations

import re
from typing import Optional

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static, Tab, Tabs

from thundervis.present.asm import STAGES, build_text
from thundervis.safe_text import visible_line

from . import styling
from .base_screen import DetailScreen, detail_bindings
from thundervis.present.errors import DataError
from thundervis.present.kernel_rows import KernelRow
from .lines_view import LinesView
from thundervis.present.units import plural, plural_word

LINE_HL = Style(bgcolor="#4b3d12")  # instructions of the selected Triton line
SYMBOL_HL = Style(bgcolor="#2a3320")  # instructions of the selected line's symbol
NOTE = Style(color=styling.DIM)
STAGE_NAMES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "sass": "SASS"}


def _compact(line: str) -> str:
    """Return a SASS line without nvdisasm's column padding (runs of blanks become two)."""
    return re.sub(r"\s{3,}", "  ", line.strip())


class AsmScreen(DetailScreen):
    """Machine code of one kernel: stage tabs, the Triton source (left) and the stage (right)."""

    TITLE_ID = "atitle"
    BINDINGS = detail_bindings(
        "escape,a", Binding("t", "next_target", "Target"), Binding("u", "next_symbol(1)", "Symbol"),
        Binding("U", "next_symbol(-1)", "Prev symbol", show=False), Binding("tab", "switch_pane", "Pane", show=False),
        Binding("left_square_bracket", "stage(-1)", "Prev stage"),
        Binding("right_square_bracket", "stage(1)", "Next stage"))

    def __init__(self, data, kernel: KernelRow, stage: str = "sass", target: Optional[str] = None):
        super().__init__()
        self.data = data
        self.kernel = kernel
        self.stage = stage
        self.target = target
        self.targets: list[str] = []
        self.listing = None
        self.shown: list[str] = []  # the stage lines as drawn
        self.error: Optional[str] = None
        self.triton_line = 0  # the selected Triton source line (1-based; 0: none)
        self.symbol: Optional[str] = None  # its symbol

    def compose_body(self) -> ComposeResult:
        """The stage tabs, the two panes and the info line."""
        yield Tabs(*(Tab(STAGE_NAMES[s], id=s) for s in STAGES), active=self.stage, id="astages")
        with Horizontal(id="apanes"):
            yield LinesView(id="asrc")
            yield LinesView(id="acode")
        yield Static(id="ainfo")

    def on_mount(self) -> None:
        """Load the targets and the first listing."""
        self.set_title(Text(f"asm · {visible_line(self.kernel.name)} · loading …"))
        self.load()

    # -- loading --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="asm")
    def load(self) -> None:
        """Worker: read the recorded targets and the listing of the current target and stage."""
        try:
            if not self.targets:
                self.targets = self.data.asm_targets(self.kernel.id)
            target = self.target or (self.targets[0] if self.targets else None)
            listing, error = self.data.asm_listing(self.kernel.id, target, self.stage), None
        except DataError as e:
            listing, error = None, str(e)
        self.app.call_from_thread(self._show, listing, error)

    def _show(self, listing, error: Optional[str]) -> None:
        self.listing, self.error = listing, error
        if listing is not None:
            self.target = listing.target
        self._show_title()
        src, code = self.query_one("#asrc", LinesView), self.query_one("#acode", LinesView)
        if listing is None:
            src.set_lines([], lambda i, w: Text(""), lambda i: None)
            code.set_lines([], lambda i, w: Text(""), lambda i: None)
            self._info(Text(visible_line(error or "no machine code"), style=Style(color="#e5c07b")))
            return
        uids = listing.build.line_uids
        src.set_lines(listing.triton_source, self._source_line, lambda i: uids.get(i + 1))
        self.shown = [_compact(r.text) if listing.stage == "sass" else r.text for r in listing.rows]
        code.set_lines(self.shown, self._code_line,
                       lambda i: listing.rows[i].uid if 0 <= i < len(listing.rows) else None)
        if not self.triton_line:  # start on the first Triton line that became a symbol's instructions
            self.triton_line = min((r.triton_line for r in listing.rows if r.triton_line and r.uid), default=1)
        src.move_cursor(self.triton_line - 1)
        if not code.has_focus:
            src.focus()
        self._select_line(self.triton_line)

    def _show_title(self) -> None:
        """Draw the title line at the screen's width: the kernel, target, stage and build summary.
        On a narrow screen the stage's line count goes first, then the other targets' hint, then
        the summary takes its short form (the same numbers), then the "asm" prefix goes, then the
        stage's name (the tabs below show it); only a line still too long (a long kernel name) is
        cut, at its end."""
        listing = self.listing
        name = visible_line(self.kernel.name)
        if listing is None:
            self.set_title(self._title("asm · ", name, "", ""))
            return
        others = [t for t in self.targets if t != listing.target]
        hint = f"  (t: {', '.join(others)})" if others else ""
        lines = f" · {plural(len(listing.rows), 'line')}"
        target = f" · {listing.target}"
        head = f"{target} · {STAGE_NAMES[listing.stage]}"
        full, short = f" · {build_text(listing.build)}", f" · {build_text(listing.build, short=True)}"
        line = self.query_one(f"#{self.TITLE_ID}", Static)
        room = self.size.width - line.styles.gutter.width
        # The layouts from the widest, each dropping one thing more: the first that fits is drawn
        # (none fits: the narrowest, cut at the edge).
        layouts = [("asm · ", head + lines + full, hint), ("asm · ", head + full, hint), ("asm · ", head + full, ""),
                   ("asm · ", head + short, ""), ("", head + short, ""), ("", target + short, "")]
        for prefix, rest, tail in layouts:
            if cell_len(prefix + name + rest + tail) <= room:
                break
        title = self._title(prefix, name, rest, tail)
        title.truncate(max(1, room), overflow="ellipsis")  # a line still too long ends in "…"
        self.set_title(title)

    @staticmethod
    def _title(prefix: str, name: str, rest: str, hint: str) -> Text:
        """Return the title line's ``Text``: ``prefix`` bold, the kernel ``name``, ``rest`` and the
        targets ``hint`` dimmed (every part plain data, never markup)."""
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(prefix, style=Style(bold=True))
        title.append(name, style=styling.S_FUSION)
        title.append(rest)
        if hint:
            title.append(hint, style=NOTE)
        return title

    def on_resize(self) -> None:
        """Fit the title line to the new width."""
        if self.listing is not None:
            self._show_title()

    # -- drawing --------------------------------------------------------------------------------

    def _source_line(self, i: int, width: int) -> Text:
        line = i + 1
        t = Text(no_wrap=True, end="")
        t.append(f"{line:>4} ", style=NOTE)
        t.append(self.listing.triton_source[i])  # visible_line'd by present.asm: plain data
        if line == self.triton_line:
            t.stylize(LINE_HL)
        elif self.symbol and self.listing.build.line_uids.get(line) == self.symbol:
            t.stylize(SYMBOL_HL)
        return t

    def _code_line(self, i: int, width: int) -> Text:
        r = self.listing.rows[i]
        t = Text(no_wrap=True, end="")
        t.append(self.shown[i])
        note = " ".join(x for x in (r.uid, r.where) if x)
        if note:
            t.append(f"   # {note}", style=NOTE)
        if r.triton_line and r.triton_line == self.triton_line:
            t.stylize(LINE_HL)
        elif self.symbol and r.uid == self.symbol:
            t.stylize(SYMBOL_HL)
        return t

    def _info(self, text: Text) -> None:
        self.query_one("#ainfo", Static).update(text)

    # -- selection ------------------------------------------------------------------------------

    def _select_line(self, line: int) -> None:
        """Highlight the instructions of Triton line ``line`` and of its symbol; say what it is."""
        if self.listing is None:
            return
        self.triton_line = line
        self.symbol = self.listing.build.line_uids.get(line)
        rows = [r for r in self.listing.rows if r.triton_line == line]
        same = [r for r in self.listing.rows if self.symbol and r.uid == self.symbol]
        code = self.query_one("#acode", LinesView)
        src = self.query_one("#asrc", LinesView)
        code.redraw()
        src.redraw()
        if rows:
            code.scroll_into_view(rows[0].index)
        t = Text()
        t.append(f"triton line {line}: ", style=Style(bold=True))
        t.append(f"{len(rows)} {STAGE_NAMES[self.listing.stage]} {plural_word(len(rows), 'line')}")
        if self.symbol:
            member = self.listing.build.members.get(self.symbol) or {}
            t.append(f" · symbol {visible_line(self.symbol)} {visible_line(str(member.get('sym') or ''))}")
            t.append(f" ({plural(len(same), 'line')})", style=NOTE)
            where = next((r.where for r in same if r.where), None)
            if where:
                t.append(" · ")
                t.append(visible_line(where), style=styling.S_FILE)
        self._info(t)

    def _select_row(self, index: int) -> None:
        """Show instruction ``index``'s symbol, op, user source line and Triton line."""
        if self.listing is None or not 0 <= index < len(self.listing.rows):
            return
        r = self.listing.rows[index]
        t = Text()
        t.append(f"{STAGE_NAMES[self.listing.stage]} line {index + 1}: ", style=Style(bold=True))
        if r.uid:
            t.append(f"symbol {visible_line(r.uid)} {visible_line(r.sym or '')}")
            if r.where:
                t.append(" · ")
                t.append(visible_line(r.where), style=styling.S_FILE)
        else:
            t.append("no symbol (kernel prologue, epilogue or Triton library code)", style=NOTE)
        if r.triton_line:
            t.append(f" · triton line {r.triton_line}", style=NOTE)
        self._info(t)
        if r.triton_line and r.triton_line != self.triton_line:
            self.triton_line, self.symbol = r.triton_line, r.uid
            src = self.query_one("#asrc", LinesView)
            src.redraw()
            src.scroll_into_view(r.triton_line - 1)
            self.query_one("#acode", LinesView).redraw()

    @on(LinesView.CursorMoved)
    def _moved(self, event: LinesView.CursorMoved) -> None:
        if self.listing is None or not event.view.has_focus and event.view.id == "acode":
            return
        if event.view.id == "asrc":
            self._select_line(event.index + 1)
        else:
            self._select_row(event.index)

    @on(Tabs.TabActivated)
    def _stage_tab(self, event: Tabs.TabActivated) -> None:
        stage = event.tab.id if event.tab is not None else None
        if stage in STAGES and stage != self.stage:
            self.stage = stage
            self.load()

    # -- actions --------------------------------------------------------------------------------

    def action_stage(self, delta: int) -> None:
        """Show the previous (-1) or next (1) stage."""
        i = (STAGES.index(self.stage) + delta) % len(STAGES)
        self.query_one(Tabs).active = STAGES[i]

    def action_next_target(self) -> None:
        """Show the next recorded GPU target."""
        if len(self.targets) > 1:
            i = (self.targets.index(self.target) + 1) % len(self.targets) if self.target in self.targets else 0
            self.target = self.targets[i]
            self.load()

    def action_next_symbol(self, delta: int) -> None:
        """Select the next (1) or previous (-1) symbol of the kernel, in Triton line order: its
        instructions are highlighted and its first Triton line selected."""
        if self.listing is None:
            return
        firsts: dict[str, int] = {}
        for line, uid in sorted(self.listing.build.line_uids.items()):
            if any(r.uid == uid for r in self.listing.rows):
                firsts.setdefault(uid, line)
        order = sorted(firsts, key=firsts.get)
        if not order:
            return
        i = (order.index(self.symbol) + delta) % len(order) if self.symbol in order else 0
        line = firsts[order[i]]
        src = self.query_one("#asrc", LinesView)
        if src.cursor != line - 1:
            src.move_cursor(line - 1)  # its CursorMoved selects the line and its symbol
        else:
            self._select_line(line)

    def action_switch_pane(self) -> None:
        """Move focus between the Triton source and the machine code."""
        src, code = self.query_one("#asrc", LinesView), self.query_one("#acode", LinesView)
        (code if src.has_focus else src).focus()
