"""The one error views raise for a read they cannot answer."""
from __future__ import annotations


class DataError(Exception):
    """A read failed (damaged recording, unknown graph, chain, pass or symbol); the message is one
    sentence for the user."""


def data_errors(fn, *args, **kwargs):
    """Return ``fn(*args, **kwargs)``; a ``RecordingError`` or ``UnknownItem`` it raises becomes a
    :class:`DataError` with the same sentence."""
    from thundervis.recording import RecordingError, UnknownItem
    try:
        return fn(*args, **kwargs)
    except (RecordingError, UnknownItem) as e:
        raise DataError(str(e)) from None
