"""Errors every layer may raise for the user: one sentence, no traceback."""
from __future__ import annotations


class UserError(Exception):
    """A problem with what the user asked for: the CLI prints it as one sentence, exit code 2."""
