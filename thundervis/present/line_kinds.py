"""The kinds of a printed trace line and of the spans inside it: the vocabulary every view styles.

The printer (``compiler.printer``) owns these names; views read them here, because front ends import
nothing from the compiler (the import contracts in pyproject.toml). A :class:`PrintedLine` is one
line of :mod:`.trace_lines`' rendering: its text, kind, uid, depth and ``(start, end, kind)`` spans.
"""
from __future__ import annotations

from thundervis.compiler.printer import (CALL, CODE, COMMENT, DEF, DEL, EXECUTOR, FILE, HEADER,  # noqa: F401
                                         KEYWORD, META, MODULE, NAME, NOTE, RETURN, SOURCE, STMT, SUB,
                                         TYPE, UID, PrintedLine)

# Line kinds, in print order.
LINE_KINDS = (HEADER, DEF, META, SOURCE, STMT, SUB, DEL, RETURN)
# Span kinds inside a line.
SPAN_KINDS = (CALL, NAME, TYPE, COMMENT, EXECUTOR, NOTE, UID, FILE, CODE, MODULE, KEYWORD)
