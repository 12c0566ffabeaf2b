"""The Source view's rows: one user file, line by line, with what the compiler made of each line.

For a recording and one of the user files it recorded, :func:`source_file` returns a
:class:`SourceFile` whose :class:`SourceLine` rows hold, per line of the recorded file text, the ops
of the executed chains' final passes (forward, backward, inference) whose source is that line, the
kernels those ops ended in, the ops that run on torch and why (not lowered, not fused, a kernel that
fell back at run time, a chain that ran eagerly), and the line's share of the profiled time.

Rules this module owns (every view shows them as computed here):

- An op is a direct member of a fusion (it ends in that kernel) or a top-level symbol of the final
  pass that is not a fusion and not ``del``; nested subsymbols (decompositions) are not separate ops.
- Time: a kernel's median time is split evenly over its member ops, a torch op keeps its own; a
  line's time is the sum over its ops, its share is that time over the summed median time of the
  chains shown (forward + backward + inference of the graphs shown).
- A line's ops in several graphs (a recompile per shape, a dynamic-shape graph per shape) that are
  the same in each (same chain, op names, kernels but for their ``gN_`` prefix, ops on torch and why)
  are one note naming its graphs (``g0–3``), not one per graph.
- A file is named by its basename (``train.py``; a notebook cell by the name it was recorded under);
  :func:`resolve_file` accepts a basename or any path suffix of a recorded file.

Everything read from the recording stays data: rows hold raw strings; the CLI makes control
characters visible, the TUI builds ``Text``, the widget escapes. Reads go through the reader API only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from thundervis.recording import TooLarge, UnknownItem, chain_position, line_budget

from .status import (EAGER, EXECUTED_CHAINS, KERNEL, chain_eager, chains_with_passes, fallback_reasons,
                     graph_eager, kernel_runs, ran_on_text, symbol_status)
from .source_rows import (COMPILED, FELL_BACK, NO_OPS, PARTLY_TORCH, ChainNote, LineOp,  # noqa: F401
                          SourceLine, _one_line, file_label, op_name)
from .eager_regions import eager_regions
from .units import format_us, plural


@dataclass(frozen=True)
class SourceFile:
    """One recorded user file annotated line by line. ``recorded`` False: the recording holds no
    text for it, so ``lines`` holds only the lines ops came from, with the code the compiler
    recorded. ``graph``: the graph shown (None: all). ``total_us``: the profiled time shares are
    relative to (None: not profiled). ``graph_ops``: (graph id, ops made from this file) for every
    recorded graph, whichever is shown: what a graph picker offers."""

    file: str
    recorded: bool
    graph: Optional[int]
    lines: tuple
    total_us: Optional[float]
    files: tuple
    graph_ops: tuple = ()
    note: str = ""  # the parts not shown because they are too large to show (one sentence each), else empty

    @property
    def label(self) -> str:
        """The file's short name (:func:`file_label`)."""
        return file_label(self.file)

    @property
    def annotated(self) -> tuple:
        """The lines that have ops."""
        return tuple(x for x in self.lines if x.ops)

    @property
    def profiled(self) -> bool:
        """Whether time shares were measured."""
        return self.total_us is not None

    def line(self, number: int) -> SourceLine:
        """Return the row of line ``number``; :class:`UnknownItem` when the file has no such line."""
        for x in self.lines:
            if x.line == number:
                return x
        raise UnknownItem(f"{self.label} has no line {number} (lines 1-{len(self.lines)})")

    def summary(self) -> str:
        """One line: ``train.py · 28 of 170 lines made 416 ops in 28 kernels · 65 on torch``."""
        ops = [o for x in self.lines for o in x.ops]
        kernels = {(o.graph, o.kernel) for o in ops if o.kernel}
        n_torch = sum(1 for o in ops if not o.kernel and (o.executor == "torch" or o.fallback))
        made = (f"{len(self.annotated)} of {plural(len(self.lines), 'line')} made {plural(len(ops), 'op')}"
                f" in {plural(len(kernels), 'kernel')}") if ops else \
            f"{plural(len(self.lines), 'line')} · made no ops (no compiled graph traced a line of it)"
        parts = [self.label + (f" · graph {self.graph}" if self.graph is not None else ""), made]
        if n_torch:
            parts.append(f"{n_torch} on torch")
        if not self.recorded:
            parts.append("file text too large to show" if "recorded source" in self.note else "file text not recorded")
        if self.note and ("symbol list" in self.note or "trace of" in self.note):
            parts.append("some ops too large to show")
        if self.profiled:
            parts.append(f"profiled: {format_us(self.total_us)} per step")
        return " · ".join(parts)

    def graph_options(self) -> list[tuple[Optional[int], str]]:
        """Return the graph picker's choices, (graph id or None for all, label): ``all graphs · 496
        ops``, then ``graph 0 · 480 ops`` per graph (``no ops from this file`` where it made none)."""
        def ops(n: int) -> str:
            return plural(n, "op") if n else "no ops from this file"
        return [(None, f"all graphs · {ops(sum(n for _, n in self.graph_ops))}")] + \
            [(g, f"graph {g} · {ops(n)}") for g, n in self.graph_ops]

    def as_json(self) -> dict:
        """Return a JSON-ready dict (what ``thundervis source --json`` prints and the widget sends;
        ``graph_options``: :meth:`graph_options` as ``{"graph", "label"}``)."""
        return {"file": self.file, "label": self.label, "recorded": self.recorded, "graph": self.graph,
                "total_us": self.total_us, "summary": self.summary(), "files": list(self.files),
                "graph_options": [{"graph": g, "label": text} for g, text in self.graph_options()],
                "note": self.note,
                "lines": [x.as_json() for x in self.lines]}


def recorded_files(rec) -> list[str]:
    """Return the user files the recording holds (with or without their text), sorted."""
    return list(rec.source_files())


def default_file(rec) -> Optional[str]:
    """Return the file a Source view opens on: the run's script when ops came from it, else the
    first recorded file ops came from, else the script or the first recorded file (None when
    there is none). The script's text is recorded whether or not it made ops."""
    files = recorded_files(rec)
    script = rec.run().script
    with_ops = set()
    for g in rec.graphs():
        for c in chains_with_passes(g, tuple(EXECUTED_CHAINS)):
            try:
                with_ops.update(s.source.file for s in rec.symbols(g.id, c.kind, c.passes[-1].index)
                                if s.source is not None and s.source.file)
            except TooLarge:  # the view of the file says so; the choice goes on without that chain
                continue
    first = next((f for f in files if f in with_ops), None)
    if script in files and (script in with_ops or first is None):
        return script
    return first or (files[0] if files else None)


def resolve_file(rec, query: str) -> str:
    """Return the recorded file ``query`` names: the file itself, its basename or any path suffix
    (``examples/train_gpt.py``). Raise :class:`UnknownItem` naming the recorded files when it
    matches none, or the candidates when it matches several."""
    files = recorded_files(rec)
    if query in files:
        return query
    q = query.replace("\\", "/").lstrip("./") if query not in ("", ".") else query
    hits = [f for f in files if q and (f.replace("\\", "/") == q or f.replace("\\", "/").endswith("/" + q))]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise UnknownItem(f"{query!r} matches {len(hits)} recorded files ({', '.join(hits[:6])}); "
                          "give more of the path")
    if not files:
        raise UnknownItem("this recording holds no user source files")
    shown = ", ".join(files[:12]) + (f", ... ({len(files) - 12} more)" if len(files) > 12 else "")
    raise UnknownItem(f"no recorded file matches {query!r}; recorded files: {shown}")


def _chain_ops(rec, graph, chain, fell_back: dict, timing: dict, runs: dict):
    """Yield (symbol, LineOp) for every op of ``chain``'s final pass (see the module doc)."""
    symbols = rec.symbols(graph.id, chain.kind, chain.passes[-1].index)
    kernels = {k.uid: k for k in rec.kernels(graph.id, chain.kind)}
    top = {s.uid: s for s in symbols if s.parent is None}
    for s in symbols:
        if s.sym == "del":
            continue
        if s.parent is None:
            if s.uid in kernels:
                continue  # the fusion itself: its members are the ops
            t = timing.get(s.uid)
            kind = symbol_status(s.executor, s.note)
            reason = _one_line(s.note) if kind else None
            yield s, LineOp(graph.id, chain.kind, s.uid, op_name(s.sym), s.executor, None, None, reason,
                            t, kind=kind or "")
        elif s.parent in kernels and s.parent in top:
            k = kernels[s.parent]
            t = timing.get(k.uid)
            share = t / max(1, len(k.members)) if t is not None else None
            error = fell_back.get((graph.id, chain.kind, k.name))
            reason = f"kernel {k.name} ran in torch at run time: {error}" if error is not None else None
            yield s, LineOp(graph.id, chain.kind, s.uid, op_name(s.sym), k.executor, k.name, k.id, reason,
                            share, ran_on_text(runs.get((graph.id, chain.kind, k.name))),
                            kind=KERNEL if reason else "")


def _eager_ops(rec, graph, chain_kind: Optional[str], error: str):
    """Yield (symbol, LineOp) for the ops of a chain (or graph) that ran eagerly: the top-level
    symbols of the first recorded pass of that chain (or of the graph's first chain with passes)."""
    kinds = (chain_kind,) if chain_kind else ("forward", "inference", "dynamo")
    for c in chains_with_passes(graph, kinds):
        reason = f"ran eagerly: {error}" if error else "ran eagerly"
        for s in rec.symbols(graph.id, c.kind, c.passes[0].index):
            if s.parent is None and s.sym != "del":
                yield s, LineOp(graph.id, c.kind, s.uid, op_name(s.sym), s.executor, None, None, reason, None,
                                kind=EAGER)
        return


def source_file(rec, file: str, graph: Optional[int] = None) -> SourceFile:
    """Return ``file`` (a recorded file, see :func:`resolve_file`) annotated line by line with the
    ops of every graph (or of ``graph``): :class:`SourceFile`, whose ``graph_ops`` counts every
    graph's ops from the file whichever is shown. :class:`UnknownItem` for a file or graph the
    recording does not hold."""
    file = resolve_file(rec, file)
    if graph is not None:
        rec.graph(graph)  # UnknownItem naming the graphs
    timings = rec.timings()
    events = rec.events()
    fell_back, runs = fallback_reasons(events), kernel_runs(events)
    by_line: dict[int, list] = {}
    codes: dict[int, str] = {}
    total = 0.0
    profiled = False
    graph_ops = []
    notes: list = []  # parts too large to show (TooLarge sentences): the rest of the view still shows
    for g in rec.graphs():
        shown = graph is None or g.id == graph
        found, g_total, g_profiled = _graph_ops(rec, g, timings, fell_back, runs, notes)
        if shown and g_profiled:
            total += g_total
            profiled = True
        n = 0
        for s, op in found:
            src = s.source
            if src is None or not src.line or src.file != file:
                continue
            n += 1
            if shown:
                by_line.setdefault(src.line, []).append(op)
                codes.setdefault(src.line, src.code or "")
        graph_ops.append((g.id, n))
    try:  # streamed and counted first: a recorded text too large to show leaves the code lines
        text_lines = rec.source_lines(file, line_budget(max(by_line, default=0)))
    except TooLarge as e:
        text_lines = None
        notes.insert(0, str(e))
    note = " ".join(notes)
    recorded = text_lines is not None
    text_lines = text_lines or []
    numbers = range(1, len(text_lines) + 1) if recorded else sorted(by_line)
    extra = sorted(n for n in by_line if recorded and n > len(text_lines))  # file changed after the run
    regions = eager_regions(events)
    saved = _saved_by_line(rec, file, graph)
    rows = []
    for n in list(numbers) + extra:
        ops = tuple(by_line.get(n, ()))
        code = text_lines[n - 1] if recorded and n <= len(text_lines) else codes.get(n, "")
        t = sum(o.time_us for o in ops if o.time_us is not None) if profiled and ops else None
        if t is not None and not any(o.time_us is not None for o in ops):
            t = None
        # The wording once, at the region's first line; the lines after it point back to it.
        eager = tuple(r.text if r.line == n else f"ran eagerly (see line {r.line})"
                      for r in regions if r.covers(file, n))
        rows.append(SourceLine(file, n, code, ops, t, (t / total) if t is not None and total > 0 else None, eager,
                               None if saved is None else saved.get(n, 0)))
    return SourceFile(file, recorded, graph, tuple(rows), total if profiled else None,
                      tuple(recorded_files(rec)), tuple(graph_ops), note)


def _saved_by_line(rec, file: str, graph: Optional[int]) -> Optional[dict]:
    """Return {line: bytes saved for backward of the tensors made there} in ``file`` (of ``graph``,
    or every graph), counted like the memory ledger's total; None when the recording has none."""
    from .memory import memory_report
    report = memory_report(rec, graph)
    if not report.recorded:
        return None
    out: dict = {}
    for s in report.saved:
        if s.counted and s.file == file and s.line:
            out[s.line] = out.get(s.line, 0) + s.storage_bytes
    return out


def _graph_ops(rec, g, timings, fell_back: dict, runs: dict, notes: list) -> tuple[list, float, bool]:
    """Return ([(symbol, LineOp)] of graph ``g``'s executed chains, the profiled time of its
    chains in µs, whether any was profiled)."""
    chains = sorted((c for c in g.chains if c.kind in EXECUTED_CHAINS), key=lambda c: chain_position(c.kind))
    found: list = []
    total, profiled = 0.0, False
    whole = graph_eager(g)
    if whole is not None:
        found.extend(_eager_ops(rec, g, None, _one_line(whole)))
    for c in chains:
        why = chain_eager(g, c)
        if why is not None or c.status != "compiled" or not c.passes:
            if whole is None:
                found.extend(_eager_ops(rec, g, c.kind, _one_line(why or "")))
            continue
        timing = {}
        for t in timings.for_chain(g.id, c.kind):
            if t.uid:
                timing[t.uid] = t.median_us
        for ct in timings.chains:
            if ct.graph == g.id and ct.chain == c.kind:
                total += ct.median_us
                profiled = True
        if timing and not profiled:
            total += sum(timing.values())
            profiled = True
        try:
            found.extend(_chain_ops(rec, g, c, fell_back, timing, runs))
        except TooLarge as e:  # this chain's symbols are left out, with the sentence saying why
            notes.append(str(e))
    return found, total, profiled
