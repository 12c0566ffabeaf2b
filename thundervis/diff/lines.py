"""The lines a trace diff works on: one per top-level symbol and per subsymbol, plus the signature
and the return statement.

A :class:`Line` keeps a reference to its :class:`BoundSymbol` and computes its text only when asked,
so aligning two large traces whose symbols are mostly the very same objects costs dict lookups, not
string formatting.
"""
from __future__ import annotations

from typing import Optional

from thundervis.compiler.ir import BoundSymbol, Trace
from thundervis.compiler.printer import call_text, statement_line
from thundervis.compiler.values import format_value

INPUTS_UID = "<inputs>"
RETURN_UID = "<return>"

def is_fusion(b: Optional[BoundSymbol]) -> bool:
    """Return True when ``b`` is a fusion symbol (one kernel whose subsymbols are its members): the
    flag the ``fuse`` pass sets (the trace loader infers it for older recordings)."""
    return b is not None and b.fusion


class Line:
    """One printed line of a trace: a symbol (at ``depth`` 0, or a subsymbol at depth > 0), the
    signature (uid ``<inputs>``) or the return (uid ``<return>``). ``parent`` is the position of the
    enclosing symbol's line for a subsymbol; ``origin`` the uids its symbol was made from.

    Kept small on purpose: a 100k-symbol diff holds two lines per symbol, and every byte per line
    is cache traffic when the diff aligns them.
    """

    __slots__ = ("uid", "depth", "symbol", "parent", "origin", "_text")  # noqa: RUF023

    def __init__(self, uid: str, depth: int, symbol: Optional[BoundSymbol], parent: Optional[int]):
        self.uid = uid
        self.depth = depth
        self.symbol = symbol
        self.parent = parent
        # Copied while the symbol is at hand, so alignment need not visit the symbol again.
        self.origin: tuple[str, ...] = symbol.origin if symbol is not None else ()
        self._text: Optional[str] = None

    @property
    def text(self) -> str:
        """The line as the printer prints it (``compiler.printer.statement_line``: metadata and
        executor comment included), without indentation: a diff line reads as the trace does."""
        if self._text is None:
            self._text = line_text(self)
        return self._text

    @property
    def key(self) -> str:
        """The line's code and who runs it (``t2 = prims.add(t0, t1)  # torch``): cheaper than
        :attr:`text`, for fingerprints."""
        return line_key(self)

    @property
    def sym(self) -> str:
        """The symbol name (``prims.add``, ``fw_fusion_0``), or ``def``/``return``."""
        if self.symbol is not None:
            return self.symbol.sym
        return "def" if self.uid == INPUTS_UID else "return"

    def __repr__(self) -> str:
        return f"Line({self.uid!r}, depth={self.depth}, {self.text!r})"


class EdgeLine(Line):
    """The signature or return line of ``trace``; its text comes from the trace itself."""

    __slots__ = ("trace",)

    def __init__(self, uid: str, trace: Trace):
        super().__init__(uid, 0, None, None)
        self.trace = trace


def line_text(line: Line) -> str:
    """Return the text of ``line`` (see :attr:`Line.text`)."""
    if line.symbol is None:
        return line_key(line)
    return statement_line(line.symbol, line.depth).text


def line_key(line: Line) -> str:
    """Return the key of ``line`` (see :attr:`Line.key`)."""
    b = line.symbol
    if b is None:
        t = line.trace
        if line.uid == INPUTS_UID:
            fname = t.chain if t.chain.isidentifier() else "fn"
            return f"def {fname}({', '.join(p.name for p in t.inputs)}):"
        outs = ", ".join(format_value(o) for o in t.outputs)
        return f"return ({outs}{',' if len(t.outputs) == 1 else ''})"
    text = call_text(b)
    # A top-level symbol shows who runs it, so the claim pass shows up in the diff; subsymbols of a
    # fusion inherit their kernel's executor and would only repeat it.
    if b.executor and line.depth == 0:
        text += f"  # {b.executor}"
    return text


def trace_lines(trace: Trace, depth: int = 1) -> list[Line]:
    """Return the lines of ``trace``: signature, symbols (subsymbols down to ``depth``), return."""
    lines: list[Line] = [EdgeLine(INPUTS_UID, trace)]
    append = lines.append

    def add(b: BoundSymbol, d: int, parent: Optional[int]) -> None:
        me = len(lines)
        append(Line(b.uid, d, b, parent))
        if d < depth:
            for s in b.subsymbols:
                add(s, d + 1, me)

    for b in trace.symbols:
        if not b.subsymbols or depth == 0:
            append(Line(b.uid, 0, b, None))
        else:
            add(b, 0, None)
    lines.append(EdgeLine(RETURN_UID, trace))
    return lines
