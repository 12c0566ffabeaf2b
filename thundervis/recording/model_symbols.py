"""The view model's symbol rows: one symbol of one pass, a snippet of the user's source, everything
a view shows about a symbol (:class:`SymbolDetail`) and its lineage across passes and chains.

Part of the view model (:mod:`thundervis.recording.model`, which re-exports every name): frozen
values built by the reader, each with ``as_json()``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .model_runs import KernelInfo, PassRef
from .model_timings import KernelTiming


def _source_json(s) -> Optional[dict]:
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "code": s.code, "module": s.module, "function": s.function}



# ------------------------------------------------------------------------------------ symbols

@dataclass(frozen=True)
class Symbol:
    """One bound symbol of one pass, as stored for lineage queries (``source`` is a
    ``thundervis.compiler.ir.SourceInfo`` or None)."""

    graph: int
    chain: str
    pass_index: int
    position: int
    uid: str
    parent: Optional[str]
    sym: str
    origin: tuple[str, ...]
    source: object
    seq_nr: Optional[int]
    aten: Optional[str]
    executor: Optional[str]
    note: Optional[str]

    @property
    def ref(self) -> PassRef:
        """The pass this symbol is in."""
        return PassRef(self.graph, self.chain, self.pass_index)

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"graph": self.graph, "chain": self.chain, "pass_index": self.pass_index,
                "position": self.position, "uid": self.uid, "parent": self.parent, "sym": self.sym,
                "origin": list(self.origin), "source": _source_json(self.source), "seq_nr": self.seq_nr,
                "aten": self.aten, "executor": self.executor, "note": self.note}


@dataclass(frozen=True)
class SourceSnippet:
    """Lines of the user's source around one line, read from the file text stored in the
    recording (``recorded`` False: the file was not stored, ``lines`` holds only the code the
    compiler recorded for that line)."""

    file: str
    line: int
    first_line: int
    lines: tuple[str, ...]
    recorded: bool

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"file": self.file, "line": self.line, "first_line": self.first_line,
                "lines": list(self.lines), "recorded": self.recorded}


@dataclass(frozen=True)
class SymbolDetail:
    """Everything a view shows about one symbol of one pass: the symbol, its source (with a
    snippet from the recorded file text) and module path, the symbols it came from in the previous
    pass (``came_from``) and became in the next (``became``), the symbols it ended as at the last
    pass of its chain (``ends``) and the kernel it ended in, its twins in the other chains (forward
    <-> backward by ``seq_nr``), its timing, and why it was not lowered or fused (``fallback``)."""

    symbol: Symbol
    source: object  # SourceInfo or None
    module: Optional[str]
    snippet: Optional[SourceSnippet]
    came_from: tuple[Symbol, ...]
    became: tuple[Symbol, ...]
    ends: tuple[Symbol, ...]
    kernel: Optional[KernelInfo]
    twins: tuple[Symbol, ...]
    timing: Optional[KernelTiming]
    fallback: Optional[str]

    @property
    def ref(self) -> PassRef:
        """The pass the symbol is in."""
        return self.symbol.ref

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"symbol": self.symbol.as_json(), "source": _source_json(self.source), "module": self.module,
                "snippet": self.snippet.as_json() if self.snippet else None,
                "came_from": [s.as_json() for s in self.came_from],
                "became": [s.as_json() for s in self.became],
                "ends": [s.as_json() for s in self.ends],
                "kernel": self.kernel.as_json() if self.kernel else None,
                "twins": [s.as_json() for s in self.twins],
                "timing": self.timing.as_json() if self.timing else None, "fallback": self.fallback}


# ------------------------------------------------------------------------------------ lineage

@dataclass(frozen=True)
class LineageStep:
    """The symbols of the lineage in one pass (top level only; ``n_sub`` counts subsymbols)."""

    pass_index: int
    pass_name: str
    symbols: tuple[Symbol, ...]
    n_sub: int

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"pass_index": self.pass_index, "pass_name": self.pass_name,
                "symbols": [s.as_json() for s in self.symbols], "n_sub": self.n_sub}


@dataclass(frozen=True)
class LineageEnd:
    """Where one surviving symbol ended: its executor and, for a fusion, its kernel."""

    symbol: Symbol
    executor: Optional[str]
    kernel: Optional[KernelInfo]

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"symbol": self.symbol.as_json(), "executor": self.executor,
                "kernel": self.kernel.as_json() if self.kernel else None}


@dataclass(frozen=True)
class ChainLineage:
    """The lineage within one chain; ``link`` says how the chain was reached."""

    chain: str
    link: str
    steps: tuple[LineageStep, ...]
    ends: tuple[LineageEnd, ...]

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"chain": self.chain, "link": self.link, "steps": [s.as_json() for s in self.steps],
                "ends": [e.as_json() for e in self.ends]}


@dataclass(frozen=True)
class Lineage:
    """The lineage of one query (a uid or a source line) in one graph, chain by chain."""

    graph: int
    query: str
    source: object  # SourceInfo or None
    chains: tuple[ChainLineage, ...]

    def as_json(self) -> dict:
        """Return a JSON-able dict (what ``lineage --json`` prints per graph)."""
        return {"graph": self.graph, "query": self.query, "source": _source_json(self.source),
                "chains": [c.as_json() for c in self.chains]}
