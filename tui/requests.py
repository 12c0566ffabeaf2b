"""What a screen asks the app to do: messages posted to the app, so that screens name a request
instead of calling the app's methods (the app alone decides how a request changes the view)."""
from __future__ import annotations

from typing import Optional

from textual.message import Message


class OpenKernels(Message):
    """Open the kernels table, on ``kernel_id`` when given."""

    def __init__(self, kernel_id: Optional[int] = None) -> None:
        super().__init__()
        self.kernel_id = kernel_id


class ShowRank(Message):
    """Show rank ``rank`` of the group, at ``position`` (graph, chain, pass index) when given."""

    def __init__(self, rank: int, position: Optional[tuple] = None) -> None:
        super().__init__()
        self.rank = rank
        self.position = position
