"""Errors every layer may raise for the user: one sentence, no traceback."""
from __future__ import annotations

import contextlib


class UserError(Exception):
    """A problem with what the user asked for: the CLI prints it as one sentence, exit code 2."""


def sentence(e: BaseException) -> str:
    """Return the message of ``e`` as one sentence: ending in exactly one full stop."""
    return str(e).rstrip(".") + "."


@contextlib.contextmanager
def as_user_errors(*kinds: type):
    """Re-raise an exception of one of ``kinds`` inside the block as a :class:`UserError` (its
    message as one sentence)."""
    try:
        yield
    except kinds as e:
        raise UserError(sentence(e)) from None


@contextlib.contextmanager
def writing(path):
    """Re-raise an ``OSError`` inside the block (writing ``path``) as ``cannot write PATH (why).``"""
    try:
        yield
    except OSError as e:
        raise UserError(f"cannot write {path} ({e.strerror or e}).") from None
