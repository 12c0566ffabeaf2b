"""Every fallback of a recorded run, each with the source line it concerns, for the text views.

A fallback is work that did not run the way the compiled trace says, or ran in torch instead of
a generated kernel:

- ``eager``: a chain (or a whole graph) whose compile or first call failed, so it ran eagerly
  (the ``failures`` table);
- ``kernel``: a generated kernel that failed at run time and ran its region in torch instead
  (``kernel_fallback`` events);
- ``recompile limit``: Dynamo gave up compiling a function after its recompile limit and runs it
  eagerly from then on (``dynamo_recompile_limit`` events);
- ``torch op``: an op of a compiled chain that the torch executor runs, with the note saying why
  (not lowered to prims, or not claimed by a fusion executor).

:func:`fallbacks` reads them through the reader API only; :func:`chain_counts` counts eager chains.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from .reader import Recording, RecordingError, UnknownItem

EXECUTED_CHAINS = ("forward", "backward", "inference")
EAGER, KERNEL, RECOMPILE_LIMIT, TORCH_OP = "eager", "kernel", "recompile limit", "torch op"


@dataclass(frozen=True)
class Fallback:
    """One fallback: its kind (see the module docstring), graph and chain (None when unknown),
    what fell back (a chain, a kernel, a function or an op), why, and where in the user's program
    (``file.py:LINE`` or None)."""

    kind: str
    graph: Optional[int]
    chain: Optional[str]
    what: str
    reason: str
    source: Optional[str]
    uid: Optional[str] = None

    def as_json(self) -> dict:
        """Return the fallback as a JSON-ready dict."""
        return {"kind": self.kind, "graph": self.graph, "chain": self.chain, "what": self.what,
                "reason": self.reason, "source": self.source, "uid": self.uid}


def _label(file, line) -> Optional[str]:
    if not line:
        return None
    return f"{os.path.basename(str(file or '?'))}:{line}"


def _one_line(text) -> str:
    lines = str(text or "").strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""


def _first_source(rec: Recording, graph: int, chains) -> Optional[str]:
    """Return the first source line recorded for ``graph`` in the first of ``chains`` that has one."""
    try:
        g = rec.graph(graph)
    except UnknownItem:
        return None
    for kind in chains:
        try:
            c = g.chain(kind)
        except UnknownItem:
            continue
        if not c.passes:
            continue
        try:
            for s in rec.symbols(graph, kind, c.passes[0].index):
                if s.source is not None and s.source.line:
                    return _label(s.source.file, s.source.line)
        except RecordingError:
            continue
    return None


def chain_counts(rec: Recording) -> tuple[int, int]:
    """Return (chains that ran eagerly, chains) over the forward, backward and inference chains of
    every graph; a graph that failed before any chain counts as one eager chain."""
    eager = total = 0
    for g in rec.graphs():
        chains = [c for c in g.chains if c.kind in EXECUTED_CHAINS]
        failed_graph = any(f.chain is None for f in g.failures)
        if not chains and failed_graph:
            eager, total = eager + 1, total + 1
            continue
        total += len(chains)
        eager += sum(1 for c in chains if c.status == "failed" or failed_graph)
    return eager, total


def fallbacks(rec: Recording, ops: bool = True) -> list[Fallback]:
    """Return every fallback of the recording: eager chains, run-time kernel fallbacks, Dynamo's
    recompile-limit fallbacks, and (``ops``) the ops each compiled chain leaves to torch with a note."""
    out: list[Fallback] = []
    graphs = rec.graphs()
    for g in graphs:
        for f in g.failures:
            chains = (f.chain,) if f.chain else ("dynamo", "forward", "inference")
            out.append(Fallback(EAGER, g.id, f.chain, f"{f.chain or 'graph'} ran eagerly", _one_line(f.error),
                                _first_source(rec, g.id, chains)))
    for e in rec.events("kernel_fallback"):
        d = e.data if isinstance(e.data, dict) else {}
        srcs = [s for s in d.get("sources") or [] if isinstance(s, dict)]
        where = ", ".join(filter(None, (_label(s.get("file"), s.get("line")) for s in srcs[:3]))) or None
        ex = d.get("executor") or "kernel"
        out.append(Fallback(KERNEL, e.graph, e.chain, f"{ex} kernel {d.get('kernel')} ran in torch",
                            _one_line(d.get("error")), where, d.get("uid") if isinstance(d.get("uid"), str) else None))
    for e in rec.events("dynamo_recompile_limit"):
        d = e.data if isinstance(e.data, dict) else {}
        reason = f"hit {d.get('limit_type')} ({d.get('limit')})"
        last = _one_line(d.get("reason")).split("#")[0].strip()
        if last:
            reason += f"; last guard failure: {last}"
        out.append(Fallback(RECOMPILE_LIMIT, None, None, f"Dynamo runs {d.get('function')} eagerly", reason,
                            _label(d.get("file"), d.get("line"))))
    if ops:
        for g in graphs:
            for c in g.chains:
                if c.kind not in EXECUTED_CHAINS or c.status != "compiled" or not c.passes:
                    continue
                try:
                    symbols = rec.symbols(g.id, c.kind, c.passes[-1].index)
                except RecordingError:
                    continue
                for s in symbols:
                    if s.parent is None and s.executor == "torch" and s.note and s.sym != "del":
                        src = _label(s.source.file, s.source.line) if s.source else None
                        out.append(Fallback(TORCH_OP, g.id, c.kind, s.sym, _one_line(s.note), src, s.uid))
    return out


def symbol_note(executor: Optional[str], note: Optional[str]) -> Optional[str]:
    """Return the comment a text view prints next to a symbol: ``torch: not lowered: ...`` (the
    executor, then the recorded note), or None when there is no note."""
    if not note:
        return None
    return f"{executor}: {_one_line(note)}" if executor else _one_line(note)
