"""The communication screen (``m``): the communication ops traced into the compiled graphs and the
collectives the run issued between them (DDP's reducer, FSDP2's hooks, the script's own
``torch.distributed`` calls), the whole-run counts, and per place, each collective in the order it
ran. The recording is read in a worker; every recorded string is made visible when drawn."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from thundervis.safe_text import visible_line

from . import panels, styling
from .comm_data import CommunicationInfo
from .data import DataError
from thundervis.present.units import plural


def communication_text(info: CommunicationInfo) -> Text:
    """Return the screen's text for a run's :class:`tui.comm_data.CommunicationInfo`."""
    from thundervis.present.units import format_size
    t = Text()
    t.append(f"{styling.COMM_MARK} communication\n", style=Style(bold=True, color=styling.COMM))
    if info.empty:
        t.append("\nno collective in this run: no communication op in the compiled traces, none recorded "
                 "between them\n", style=Style(dim=True))
        return t
    t.append("\nin the traces  ", style=panels.HEAD)
    t.append(f"{info.in_traces} communication ops (collectives and their waits traced into the graphs, marked "
             f"{styling.COMM_MARK} in the trace view: run by torch as opaque collectives, never fused across)\n")
    c = info.counts
    t.append("between graphs  ", style=panels.HEAD)
    t.append(f"{plural(c.between_graphs, 'collective')} run eagerly between the compiled graphs, {c.recorded} listed below")
    if not c.complete:
        t.append(" (no summary of the run yet: counts of those recorded one by one)", style=panels.DIM)
    t.append("\n")
    for op, n in sorted(c.by_op.items(), key=lambda kv: (-kv[1], kv[0])):
        t.append(f"  {visible_line(op):<22} {n:>6} ×  {format_size(c.bytes_by_op.get(op, 0)):>10} in all\n")
    if c.in_graphs_run:
        t.append(f"  {c.in_graphs_run} more seen while a compiled chain ran (counted, not listed)\n", style=panels.DIM)
    if info.places:
        t.append("\nwhere, over the whole run\n", style=panels.HEAD)
        for line in info.places:
            t.append(f"  {visible_line(line)}\n")
    for group in info.groups:
        t.append(f"\n{visible_line(group.where)}\n", style=Style(bold=True, color=styling.COMM))
        for line in group.lines:
            t.append(f"  {visible_line(line)}\n")
    return t


class CommunicationScreen(ModalScreen):
    """The run's collectives: in the traces and between the graphs, per place, in order."""

    BINDINGS = [Binding("escape,m,q", "dismiss(None)", "Close")]

    def __init__(self, data):
        super().__init__()
        self.data = data
        self.loaded = False  # the listing is on screen (tests wait on it)

    def compose(self) -> ComposeResult:
        """Build the screen's widgets (the listing follows from a worker)."""
        with VerticalScroll():
            yield Static(Text("reading the run's collectives …", style=Style(dim=True)), id="commtext")

    def on_mount(self) -> None:
        """Read the recording's communication in a worker."""
        self.load()

    @work(thread=True, exclusive=True, group="communication")
    def load(self) -> None:
        """Worker: read the communication ops of the traces and the collectives between graphs."""
        try:
            text = communication_text(self.data.communication())
        except DataError as e:
            text = Text(f"the collectives cannot be shown: {visible_line(str(e))}", style=Style(color=panels.BAD))
        self.app.call_from_thread(self._show, text)

    def _show(self, text: Text) -> None:
        if not self.is_mounted:  # closed before the worker finished
            return
        self.query_one("#commtext", Static).update(text)
        self.loaded = True
