"""The skeleton the TUI's full screens share (kernels, numerics, bisect, source, asm, rank diff):
a one-line title, the screen's own body, the footer; escape (and the screen's own key) goes back.

A subclass sets ``TITLE_ID`` (tests and workers find the title by it), builds its ``BINDINGS`` with
:func:`detail_bindings` and yields its body from :meth:`DetailScreen.compose_body`; its rules in
``tui/app.tcss`` (the app's one style sheet) style the title's colours and its body.
"""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static


def detail_bindings(back_keys: str, *own: Binding, help_key: bool = True) -> list[Binding]:
    """Return a full screen's bindings: ``back_keys`` (``"escape,k"``) pop the screen, then ``own``
    in footer order, then ``?`` for the help (unless ``help_key`` is False)."""
    back = [Binding(back_keys, "app.pop_screen", "Back")]
    return back + list(own) + ([Binding("question_mark", "app.help", "Help")] if help_key else [])


class DetailScreen(Screen):
    """A full screen pushed over the main view: title line ``#TITLE_ID``, body, footer."""

    TITLE_ID = "title"

    def compose(self) -> ComposeResult:
        """Build the title line, the subclass's body and the footer."""
        yield Static(id=self.TITLE_ID, classes="screen-title")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        """Yield the widgets between the title and the footer (none here)."""
        yield from ()

    def set_title(self, text: Text) -> None:
        """Show ``text`` (``Text``: recorded strings are data, never markup) on the title line."""
        self.query_one(f"#{self.TITLE_ID}", Static).update(text)
