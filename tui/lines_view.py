"""A scrolling view of many lines (a trace, a unified or side-by-side diff) drawn through Textual's
line API: only the lines on screen are styled, so a 10k-symbol trace costs what 50 lines cost.

The view holds a cursor line (keyboard or mouse); moving it posts :class:`LinesView.CursorMoved`
with the uid of the symbol on that line, which the app turns into the details pane.
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from thundervis.present.line_kinds import NOTE as NOTE_SPAN

from . import styling
from .layout import NOTE_LEAD, jump_top, kept_top, note_column

CURSOR = Style(bgcolor="#2f3b54")
CURSOR_BLUR = Style(bgcolor="#262b36")
SEPARATOR = Style(color="#3e4451")


class LinesView(ScrollView, can_focus=True):
    """Lines drawn on demand. ``set_trace``, ``set_unified`` and ``set_side_by_side`` choose what
    is shown; ``cursor`` is the selected line."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "Top", show=False),
        Binding("end", "jump(-1)", "Bottom", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
        Binding("enter", "activate", "Open", show=False),
    ]

    class CursorMoved(Message):
        """The cursor moved to line ``index`` showing symbol ``uid`` (None: no symbol)."""

        def __init__(self, view: "LinesView", index: int, uid: Optional[str]):
            super().__init__()
            self.view = view
            self.index = index
            self.uid = uid

    class Activated(Message):
        """Line ``index`` was activated (enter, or a click on it): the app opens or closes what
        it stands for (the signature fold)."""

        def __init__(self, view: "LinesView", index: int):
            super().__init__()
            self.view = view
            self.index = index

    def __init__(self, *, id: Optional[str] = None):
        super().__init__(id=id)
        self.cursor = 0
        self._count = 0
        self._width = 0
        self._render: Callable[[int, int], Text] = lambda i, w: Text("")
        self._uid: Callable[[int], Optional[str]] = lambda i: None
        self._note: Callable[[int], Optional[tuple]] = lambda i: None  # a trace line's note span
        self._cache: dict[tuple[int, int], Strip] = {}
        self.mode = "empty"
        self.painted_at: Optional[float] = None
        self.texts: Sequence = ()  # the plain text of each line (tests and search read it)

    # -- content --------------------------------------------------------------------------------

    def _set(self, mode: str, count: int, width: int, render, uid, texts, keep_cursor: bool) -> None:
        self.mode = mode
        self.painted_at: Optional[float] = None  # perf_counter() when its last screen line was drawn
        self._count = count
        self._width = width
        self._render = render
        self._uid = uid
        self._note = lambda i: None
        self.texts = texts
        self._cache.clear()
        self.virtual_size = Size(width + 2, count)
        old = self.cursor
        self.cursor = min(old, max(0, count - 1)) if keep_cursor else 0
        if not keep_cursor:
            self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()
        self.post_message(self.CursorMoved(self, self.cursor, self.uid_at(self.cursor)))

    def set_trace(self, lines: Sequence, keep_cursor: bool = False, marks: Optional[dict] = None) -> None:
        """Show the printed lines of a trace (``compiler.printer.PrintedLine``); ``marks``:
        ``{uid: (character, style)}`` put in the first column of that symbol's line (a numerics
        verdict)."""
        width = max((len(ln.text) for ln in lines), default=0)

        def render(i: int, w: int) -> Text:
            t = styling.trace_line(lines[i])
            mark = marks.get(lines[i].uid) if marks and lines[i].kind == "stmt" else None
            if mark is None or not t.plain[:1].isspace():
                return t
            marked = Text(mark[0], style=mark[1], end="")
            marked.append_text(t[1:])
            return marked
        self._set("trace", len(lines), width, render,
                  lambda i: lines[i].uid if 0 <= i < len(lines) else None, [ln.text for ln in lines], keep_cursor)
        self._note = lambda i: next(((a, e) for a, e, k in lines[i].spans if k == NOTE_SPAN), None)

    def set_unified(self, rows: Sequence, keep_cursor: bool = False) -> None:
        """Show unified diff rows (``thundervis.diff.render.Row``), notes after the text."""
        width = max((len(r.text) + 2 * r.depth + len(r.note) + 6 for r in rows), default=0)

        def render(i: int, w: int) -> Text:
            r = rows[i]
            t = styling.diff_cell(r)
            if r.note:
                t.append("   ")
                t.append_text(styling.diff_note(r.note, r.status))
            return t
        self._set("unified", len(rows), width, render, lambda i: _row_uid(rows[i]) if 0 <= i < len(rows) else None,
                  [f"{r.marker} {'  ' * r.depth}{r.text}   {r.note}".rstrip() for r in rows], keep_cursor)

    def set_side_by_side(self, rows: Sequence, keep_cursor: bool = False) -> None:
        """Show side-by-side rows (``thundervis.diff.render.SideRow``): before | after, note."""
        def render(i: int, w: int) -> Text:
            s = rows[i]
            half = max(10, (w - 3) // 2)
            out = Text(no_wrap=True, end="")
            if s.status == "fold":
                out.append(styling.visible_line(s.note).center(w), style=Style(color=styling.DIM, italic=True))
                return out
            left = styling.diff_cell(s.left, "-", with_marker=False) if s.left else Text("")
            right = styling.diff_cell(s.right, "+", with_marker=False) if s.right else Text("")
            if s.note and s.right is None:
                right = styling.diff_note(s.note, s.status)
            elif s.note:
                right.append("  ")
                right.append_text(styling.diff_note(s.note, s.status))
            left.truncate(half, overflow="ellipsis", pad=True)
            right.truncate(half, overflow="ellipsis", pad=False)
            out.append_text(left)
            out.append(" │ ", style=SEPARATOR)
            out.append_text(right)
            return out

        def uid(i: int) -> Optional[str]:
            if not 0 <= i < len(rows):
                return None
            s = rows[i]
            return _row_uid(s.right) or _row_uid(s.left)

        def text(s) -> str:
            left = f"{'  ' * s.left.depth}{s.left.text}" if s.left else ""
            right = f"{'  ' * s.right.depth}{s.right.text}" if s.right else ""
            return f"{left} | {right}   {s.note}".rstrip()
        self._set("side", len(rows), 0, render, uid, [text(s) for s in rows], keep_cursor)

    def set_lines(self, texts: Sequence[str], render: Callable[[int, int], Text],
                  uid: Callable[[int], Optional[str]], keep_cursor: bool = False) -> None:
        """Show ``texts`` drawn by ``render(index, width)`` (a Text: recorded strings as data),
        each line's symbol given by ``uid(index)`` (the asm view's stage and Triton source)."""
        width = max((len(t) for t in texts), default=0)
        self._set("lines", len(texts), width, render, uid, list(texts), keep_cursor)

    def redraw(self) -> None:
        """Draw every line again (what ``render`` returns changed, e.g. a new highlight)."""
        self._cache.clear()
        self.refresh()

    def scroll_into_view(self, index: int) -> None:
        """Scroll so that line ``index`` is on screen, without moving the cursor."""
        top = self.scroll_offset.y
        height = max(1, self.scrollable_content_region.height)
        if index < top or index >= top + height:
            self.scroll_to(y=max(0, index - height // 3), animate=False, immediate=True)

    def uid_at(self, index: int) -> Optional[str]:
        """Return the uid of the symbol shown on line ``index`` (None for other lines)."""
        uid = self._uid(index) if self._count else None
        return uid if uid and not uid.startswith("<") else None

    def line_count(self) -> int:
        """Return the number of lines shown."""
        return self._count

    # -- drawing --------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """Return screen line ``y``: the content line under it, cropped to the scroll position."""
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        if self.painted_at is None and (y >= self.scrollable_content_region.height - 1 or index >= self._count - 1):
            self.painted_at = time.perf_counter()  # (stamped when returning: the last line is drawn too)
            stamp = True
        else:
            stamp = False
        width = self.scrollable_content_region.width
        if index >= self._count:
            return Strip.blank(width, self.rich_style)
        key = (index, width if self.mode == "side" else 0)
        hit = self._cache.get(key)
        base = self.rich_style
        if hit is None:
            if len(self._cache) > 4000:
                self._cache.clear()
            text = self._render(index, width)
            fill = base + text.style if isinstance(text.style, Style) else base
            segments = Segment.apply_style(text.render(self.app.console, end=""), style=fill)
            hit = self._cache[key] = (Strip(list(segments)), fill)
        line, fill = hit
        strip = line.crop_extend(scroll_x, scroll_x + width, fill)
        note = self._note(index)
        col = None if note is None else note_column(len(self.texts[index]), note, width, scroll_x)
        if col is not None:  # too long for the view: its note ("ran on cpu via torch") stays on screen
            lead = Strip([Segment(NOTE_LEAD, fill + styling.S_COMMENT)])
            strip = Strip.join([strip.crop(0, col), lead, line.crop(*note)]).crop_extend(0, width, fill)
        if index == self.cursor:
            strip = Strip(list(Segment.apply_style(list(strip), post_style=CURSOR if self.has_focus else CURSOR_BLUR)))
        if stamp:
            self.painted_at = time.perf_counter()
        return strip

    def on_resize(self) -> None:
        """Side-by-side rows depend on the width: draw them again. A view made shorter (the
        details opened under it) keeps the cursor's line on screen."""
        if self.mode == "side":
            self._cache.clear()
        if self._count:
            top = self.scroll_offset.y
            kept = kept_top(self.cursor, top, self.scrollable_content_region.height)
            if kept != top:
                self.scroll_to(y=kept, animate=False, immediate=True)

    def on_focus(self) -> None:
        """Show the cursor line in its focused colour."""
        self.refresh_line(self.cursor)

    def on_blur(self) -> None:
        """Show the cursor line in its unfocused colour."""
        self.refresh_line(self.cursor)

    def refresh_line(self, index: int) -> None:
        """Redraw content line ``index`` if it is on screen."""
        y = index - self.scroll_offset.y
        if 0 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- cursor ---------------------------------------------------------------------------------

    def move_cursor(self, index: int) -> None:
        """Select line ``index`` (clamped), scroll it into view, tell the app."""
        if not self._count:
            return
        index = max(0, min(self._count - 1, index))
        if index == self.cursor:
            return
        old, self.cursor = self.cursor, index
        self.refresh_line(old)
        self.refresh_line(index)
        top = self.scroll_offset.y
        height = max(1, self.scrollable_content_region.height)
        if index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True)
        self.post_message(self.CursorMoved(self, index, self.uid_at(index)))

    def jump_to(self, index: int) -> None:
        """Select line ``index`` as a jump does (a search hit, a symbol picked elsewhere): the line
        itself on screen with the lines above it that say where it comes from
        (:func:`.layout.jump_top`), even when the cursor was there already."""
        if not self._count:
            return
        index = max(0, min(self._count - 1, index))
        height = max(1, self.scrollable_content_region.height)
        top = jump_top(index, self.scroll_offset.y, height, self._count)
        if top != self.scroll_offset.y:
            self.scroll_to(y=top, animate=False, immediate=True)
        self.move_cursor(index)

    def action_cursor(self, delta: int) -> None:
        """Move the cursor ``delta`` lines."""
        self.move_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        """Move the cursor one screen up (-1) or down (1)."""
        self.move_cursor(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, where: int) -> None:
        """Move the cursor to the first (0) or last (-1) line."""
        self.move_cursor(self._count - 1 if where < 0 else where)

    def on_click(self, event) -> None:
        """Select the clicked line."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = self.scroll_offset.y + offset.y
        self.move_cursor(index)
        self.focus()
        if 0 <= index < self._count:
            self.post_message(self.Activated(self, index))

    def action_activate(self) -> None:
        """Activate the cursor line (enter)."""
        if self._count:
            self.post_message(self.Activated(self, self.cursor))


def _row_uid(row) -> Optional[str]:
    if row is None:
        return None
    uid = getattr(row, "uid", "")
    return uid or None
