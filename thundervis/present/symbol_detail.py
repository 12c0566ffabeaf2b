"""What a details pane shows about one symbol, as text rows: where it came from in the user's
source (with the lines around it), what it came from and became, the kernel it ended in, its
forward/backward twins, why it runs where it runs, its timing and its lineage through every
chain's passes. The TUI's details pane draws it; the widget sends :meth:`SymbolView.as_json`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .units import format_gbps, format_us, plural


@dataclass(frozen=True)
class SymbolView:
    """The details of one symbol as of one pass (see the module docstring); labels are ready to
    show (recorded text as recorded: views make it visible or escape it)."""

    uid: str
    sym: str
    chain: str
    executor: Optional[str]
    note: Optional[str]
    aten: Optional[str]
    seq_nr: Optional[int]
    source_file: Optional[str]
    source_line: Optional[int]
    source_code: Optional[str]
    module: Optional[str]
    snippet: tuple[tuple[int, str], ...]  # (line number, text) around the source line
    snippet_recorded: bool  # the snippet comes from the file text stored in the recording
    came_from: tuple[str, ...]  # symbols of the previous pass it was made from
    became: tuple[str, ...]  # symbols of the next pass made from it
    fallback: Optional[str]  # why it was not lowered / not fused
    lineage: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]  # (chain, link, ((passes, symbols), ...))
    ended_in: tuple[str, ...]  # "fw_fusion_3 [triton]", or the op and its executor
    twins: tuple[str, ...]  # symbols of other chains linked by seq_nr
    timing: Optional[str]

    def as_json(self) -> dict:
        """Return the view as JSON values (tuples as lists)."""
        return {"uid": self.uid, "sym": self.sym, "chain": self.chain, "executor": self.executor,
                "note": self.note, "aten": self.aten, "seq_nr": self.seq_nr, "source_file": self.source_file,
                "source_line": self.source_line, "source_code": self.source_code, "module": self.module,
                "snippet": [list(x) for x in self.snippet], "snippet_recorded": self.snippet_recorded,
                "came_from": list(self.came_from), "became": list(self.became), "fallback": self.fallback,
                "lineage": [{"chain": c, "link": link, "steps": [list(s) for s in steps]}
                            for c, link, steps in self.lineage],
                "ended_in": list(self.ended_in), "twins": list(self.twins), "timing": self.timing}


def sym_label(s) -> str:
    """Return the short name of a symbol (``add`` for ``prims.add``)."""
    return s.sym.removeprefix("prims.")


def timing_text(t) -> Optional[str]:
    """Return ``12.3 µs median over 10 calls · 4.5% of step · 12 GB/s`` for a ``KernelTiming``."""
    if t is None:
        return None
    text = f"{format_us(t.median_us)} median over {plural(t.calls, 'call')} · {t.share * 100:.1f}% of step"
    return text + (f" · {format_gbps(t.gbps)}" if t.gbps else "")


def lineage_runs(lineage) -> tuple:
    """Return a ``recording.model.Lineage`` as ``((chain, link, ((passes, symbols), ...)), ...)``:
    per chain, consecutive passes that hold the same symbols merged into one ``first…last`` entry."""
    out = []
    for cl in lineage.chains:
        runs: list[list[str]] = []
        for st in cl.steps:
            if not st.symbols:
                continue
            syms = ", ".join(sym_label(s) for s in st.symbols[:6]) + (
                f" (+{len(st.symbols) - 6})" if len(st.symbols) > 6 else "")
            if runs and runs[-1][2] == syms:
                runs[-1][1] = st.pass_name
            else:
                runs.append([st.pass_name, st.pass_name, syms])
        out.append((cl.chain, cl.link, tuple((a if a == b else f"{a}…{b}", syms) for a, b, syms in runs)))
    return tuple(out)


def symbol_view(detail, chain: str, lineage=None) -> SymbolView:
    """Return the :class:`SymbolView` of ``detail`` (a ``recording.model.SymbolDetail`` read in
    ``chain``), with ``lineage`` (a ``recording.model.Lineage``, or None) merged per chain."""
    b = detail.symbol
    ended = []
    if detail.kernel is not None:
        ended.append(f"{detail.kernel.name} [{detail.kernel.executor}]")
    for e in detail.ends:
        if detail.kernel is None or e.sym != detail.kernel.name:
            ended.append(f"{e.sym} [{e.executor or 'no executor'}]")
    src = detail.source
    snippet = ()
    if detail.snippet is not None:
        snippet = tuple((detail.snippet.first_line + i, line) for i, line in enumerate(detail.snippet.lines))
    return SymbolView(
        b.uid, b.sym, chain, b.executor, b.note, b.aten, b.seq_nr,
        src.file if src else None, src.line if src else None, src.code if src else None,
        detail.module, snippet, bool(detail.snippet and detail.snippet.recorded),
        tuple(f"{sym_label(s)} ({s.uid})" for s in detail.came_from[:6]),
        tuple(f"{sym_label(s)} ({s.uid})" for s in detail.became[:6]),
        detail.fallback, lineage_runs(lineage) if lineage is not None else (), tuple(dict.fromkeys(ended)),
        tuple(f"{t.chain}: {sym_label(t)} ({t.uid})" for t in detail.twins[:6]), timing_text(detail.timing))
