"""The one error a recording store raises for a file it cannot read.

Every layer of :mod:`thundervis.recording` (the stores, the typed reading, the reader) raises
:class:`RecordingError` with a message that is one sentence for the user; the CLI turns it into
exit 2. Asking for something the file does not hold is :class:`~.model.UnknownItem` instead.
"""
from __future__ import annotations


class RecordingError(Exception):
    """The file cannot be read as a recording; the message is one sentence for the user."""
