"""The Source screen (``S``): the user's file line by line, each line marked with what the compiler
made of it (thundervis.present.source_view rows): its share of the profiled time, ops fused into
kernels, ops left to torch and why, chains that ran eagerly. Enter on a line closes the screen with a
:class:`SourceJump` to that line's ops (the app shows them in the final pass of their chain).

Recorded text is data: every string goes into ``Text`` through ``safe_text.visible_line``, never
into markup.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from thundervis.present.source_view import COMPILED, FELL_BACK, PARTLY_TORCH, file_label
from thundervis.present.units import format_bytes, format_share
from thundervis.safe_text import visible_line

from .base_screen import DetailScreen, detail_bindings

# The mark before each line: how its ops run (present.source_view.SourceLine.status).
MARKS = {COMPILED: ("●", "green"), PARTLY_TORCH: ("●", "yellow"), FELL_BACK: ("▲", "red")}


@dataclass(frozen=True)
class SourceJump:
    """Where enter on a line goes: the line's ops in the final pass of ``chain`` of ``graph``
    (``uids``), the kernel the first of them ended in (``kernel_id``), and the source line;
    ``to_kernel``: open that kernel in the kernels table instead (``k``)."""

    graph: int
    chain: str
    uids: tuple
    kernel_id: Optional[int]
    file: str
    line: int
    to_kernel: bool = False


def line_text(row, width: int, profiled: bool = True, saved: bool = False) -> Text:
    """Return one line of the file as ``Text`` on one row (a long line ends in an ellipsis: the
    detail pane shows it whole): number, time share (only when ``profiled``), bytes saved for
    backward (only when ``saved``: the recording has a memory ledger), mark, code (visible)."""
    out = Text(f"{row.line:>{width}} ", style="dim", no_wrap=True, overflow="ellipsis")
    if profiled:
        share = format_share(row.share) if row.share is not None else ""
        out.append(f"{share:>6} ", style=Style(color="magenta") if share else None)
    if saved:
        kept = format_bytes(row.saved_bytes) if row.saved_bytes else ""
        out.append(f"{kept:>9} ", style=Style(color="cyan") if kept else None)
    mark, color = MARKS.get(row.status, (" ", None))
    out.append(mark + " ", style=Style(color=color, bold=True) if color else None)
    out.append(visible_line(row.text.rstrip()), style=None if row.ops else "dim")
    return out


def line_detail(row) -> Text:
    """Return what the detail pane shows for one line: its label, time, and per chain the ops, the
    kernels they ended in and the ops left to torch with the reason (all recorded text visible)."""
    out = Text(visible_line(row.label), style="bold")
    if row.time_us:
        out.append("  " + visible_line(row.time_text()), style="magenta")
    if row.saved_bytes:
        out.append("  " + visible_line(row.saved_text()), style="cyan")
    if row.status:
        mark, color = MARKS.get(row.status, (" ", None))
        out.append(f"  {mark} {row.status}", style=Style(color=color) if color else None)
    out.append("\n")
    out.append(visible_line(row.text.strip()) + "\n", style="italic")
    if not row.ops:
        out.append("no op of a compiled chain comes from this line", style="dim")
        return out
    for note in row.notes():
        out.append(f"{note.graph_label} ", style="dim")
        out.append(visible_line(note.text()) + "\n")
    for op, why in row.severe_fallbacks:
        out.append(visible_line(f"{op}: {why}") + "\n", style=Style(color="red"))
    out.append("enter: show these ops in their pass" + (" · k: their kernel" if row.kernels else ""), style="dim")
    return out


class SourceScreen(DetailScreen):
    """A recorded user file annotated line by line; ``f`` switches file, enter jumps to the ops."""

    TITLE_ID = "stitle"
    BINDINGS = detail_bindings("escape,S", Binding("f", "next_file", "File"), Binding("k", "kernel", "Kernel"),
                               Binding("n", "next_annotated(1)", "Next op line"),
                               Binding("p", "next_annotated(-1)", "Prev op line"))

    def __init__(self, load: Callable, files: Sequence[str], file: Optional[str] = None,
                 line: Optional[int] = None):
        """``load(file)`` returns a ``SourceFile`` (called in a worker thread); ``files`` are the
        recorded files; ``file``/``line`` what to show first (default: the first file with ops)."""
        super().__init__()
        self.load = load
        self.files = list(files)
        self.file = file if file in self.files else (self.files[0] if self.files else None)
        self.start_line = line
        self.view = None

    def compose_body(self) -> ComposeResult:
        """The files list (shown when there are several), the file's lines and the line's detail."""
        with Horizontal(id="sbody"):
            yield OptionList(id="sfiles")
            yield OptionList(id="slines")
        yield Static(id="sdetail")

    def on_mount(self) -> None:
        """List the files and load the first."""
        files = self.query_one("#sfiles", OptionList)
        files.set_class(len(self.files) > 1, "-many")
        for f in self.files:
            files.add_option(Option(Text(visible_line(file_label(f))), id=None))
        if self.file is None:
            self.set_title(Text("this recording holds no user source files"))
            return
        self.open_file(self.file, self.start_line)

    def open_file(self, file: str, line: Optional[int] = None) -> None:
        """Show ``file`` (loaded in a worker), the cursor on ``line`` or its first line with ops."""
        self.file = file
        self.set_title(Text(f"loading {visible_line(file_label(file))} …"))
        files = self.query_one("#sfiles", OptionList)
        if file in self.files and files.highlighted != self.files.index(file):
            with files.prevent(OptionList.OptionHighlighted):
                files.highlighted = self.files.index(file)
        self._load(file, line)

    @work(thread=True, exclusive=True, group="source")
    def _load(self, file: str, line: Optional[int]) -> None:
        try:
            view = self.load(file)
        except Exception as e:  # a reader error: one sentence on the title line
            self.app.call_from_thread(self._failed, str(e))
            return
        self.app.call_from_thread(self.show_file, view, line)

    def _failed(self, message: str) -> None:
        self.set_title(Text(visible_line(message), style="red"))

    def show_file(self, view, line: Optional[int] = None) -> None:
        """Fill the lines list from a ``SourceFile``."""
        self.view = view
        self.set_title(Text(visible_line(view.summary())))
        lines = self.query_one("#slines", OptionList)
        lines.clear_options()
        width = len(str(view.lines[-1].line)) if view.lines else 1
        saved = any(r.saved_bytes for r in view.lines)  # the bytes-saved column, where there is a ledger
        lines.add_options([Option(line_text(r, width, view.profiled, saved), id=str(i))
                           for i, r in enumerate(view.lines)])
        target = None
        if line is not None:
            target = next((i for i, r in enumerate(view.lines) if r.line == line), None)
        if target is None:
            target = next((i for i, r in enumerate(view.lines) if r.ops), 0)
        if view.lines:
            lines.highlighted = target
            lines.scroll_to_highlight(top=True)
        lines.focus()
        self._show_detail()

    def selected(self):
        """The ``SourceLine`` under the cursor (None before the file is loaded)."""
        lines = self.query_one("#slines", OptionList)
        if self.view is None or lines.highlighted is None or lines.highlighted >= len(self.view.lines):
            return None
        return self.view.lines[lines.highlighted]

    def _show_detail(self) -> None:
        row = self.selected()
        text = Text("")
        if self.view is not None and self.view.note:  # present's sentences: what is too large to show
            text.append(visible_line(self.view.note) + "\n", style="yellow")
        if row is not None:
            text.append_text(line_detail(row))
        self.query_one("#sdetail", Static).update(text)

    @on(OptionList.OptionHighlighted, "#slines")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(OptionList.OptionSelected, "#slines")
    def _selected(self) -> None:
        self._jump(to_kernel=False)

    def action_kernel(self) -> None:
        """Open the kernels table on the kernel the line's first fused op ended in."""
        self._jump(to_kernel=True)

    def _jump(self, to_kernel: bool) -> None:
        row = self.selected()
        if row is None:
            return
        ops = [o for o in row.ops if o.kernel_id is not None] if to_kernel else list(row.ops)
        if not ops:
            what = "No op of this line ended in a kernel." if to_kernel and row.ops else \
                "No op of a compiled chain comes from this line."
            self.app.notify(what, severity="information")
            return
        first = ops[0]
        uids = tuple(o.uid for o in ops if (o.graph, o.chain) == (first.graph, first.chain))
        self.dismiss(SourceJump(first.graph, first.chain, uids, first.kernel_id, row.file, row.line, to_kernel))

    @on(OptionList.OptionSelected, "#sfiles")
    def _file_picked(self, event: OptionList.OptionSelected) -> None:
        self.open_file(self.files[event.option_index])

    def action_next_file(self) -> None:
        """Show the next recorded file."""
        if len(self.files) > 1 and self.file in self.files:
            self.open_file(self.files[(self.files.index(self.file) + 1) % len(self.files)])

    def action_next_annotated(self, step: int) -> None:
        """Move the cursor to the next (1) or previous (-1) line with ops."""
        if self.view is None:
            return
        lines = self.query_one("#slines", OptionList)
        i = lines.highlighted if lines.highlighted is not None else -1
        n = len(self.view.lines)
        for k in range(1, n + 1):
            j = i + step * k
            if not 0 <= j < n:
                break
            if self.view.lines[j].ops:
                lines.highlighted = j
                return
