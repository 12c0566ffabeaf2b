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

import os
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Optional

from thundervis.recording import UnknownItem, chain_position

from .status import (EAGER, EXECUTED_CHAINS, KERNEL, chain_eager, chains_with_passes, fallback_reasons,
                     graph_eager, kernel_runs, ran_on_text, symbol_status)
from .units import format_share, format_us

# SourceLine.status values.
NO_OPS, COMPILED, PARTLY_TORCH, FELL_BACK = "", "compiled", "partly torch", "fell back"


def file_label(file: str) -> str:
    """Return the short name views show for a recorded file: its basename (a notebook cell keeps
    the name it was recorded under, e.g. ``cell [3]``)."""
    if file.startswith("cell ["):
        return file
    return os.path.basename(file) or file


def op_name(sym: str) -> str:
    """Return an op's short name: ``prims.mm`` -> ``mm``, ``aten.embedding.default`` -> ``embedding``."""
    for prefix in ("prims.", "aten.", "torch.nn.functional.", "torch."):
        if sym.startswith(prefix):
            sym = sym[len(prefix):]
            break
    return sym.removesuffix(".default")


def _one_line(text) -> str:
    return " ".join(str(text or "").split())


@dataclass(frozen=True)
class LineOp:
    """One op of a chain's final pass whose source is a given line: ``kernel`` (name, id) when it
    ended in a generated kernel (``ran_on``: where and how that kernel ran, ``ran on cpu via torch``,
    when recorded), ``fallback`` (why it runs on torch, one line) when it does not run as compiled,
    ``time_us`` its share of the measured time (None when not profiled). ``kind``: what kind of
    fallback (:mod:`.status`'s kinds): ``eager`` (its chain ran eagerly), ``kernel`` (its kernel fell
    back to torch at run time), ``torch op`` (left to torch by the compiler), ``""`` (none)."""

    graph: int
    chain: str
    uid: str
    op: str
    executor: Optional[str]
    kernel: Optional[str]
    kernel_id: Optional[int]
    fallback: Optional[str]
    time_us: Optional[float]
    ran_on: str = ""
    kind: str = ""

    @property
    def severe(self) -> bool:
        """Whether the op did not run as the compiler planned: its chain ran eagerly or its kernel
        fell back at run time (an op the compiler left to torch is not)."""
        return self.kind in (EAGER, KERNEL)

    def as_json(self) -> dict:
        """Return a JSON-ready dict."""
        return {"graph": self.graph, "chain": self.chain, "uid": self.uid, "op": self.op,
                "executor": self.executor, "kernel": self.kernel, "kernel_id": self.kernel_id,
                "fallback": self.fallback, "time_us": self.time_us, "ran_on": self.ran_on,
                "kind": self.kind}


# A line of a repeated block (a 24-layer model) ends in one kernel per layer: the note names this many.
NAMED_KERNELS = 4


def _kernel_list(names: list, executor: str) -> str:
    if len(names) <= NAMED_KERNELS:
        return f"{', '.join(names)} ({executor})"
    return f"{len(names)} kernels ({executor}): {', '.join(names[:NAMED_KERNELS - 1])}, … {names[-1]}"


@dataclass(frozen=True)
class ChainNote:
    """What one chain (forward, backward, inference) made of one line: ``n_ops`` ops,
    ``kernels`` ((name, executor), in order), ``torch`` ((op, reason, count): ops on torch and
    why) and ``other`` ((op, executor, count): ops of another executor outside kernels)."""

    graph: int
    chain: str
    n_ops: int
    kernels: tuple
    torch: tuple
    other: tuple
    graphs: tuple = ()  # the other graphs whose ops of this line are the same (see the module doc)
    ops: tuple = ()  # the ops' names, in order (what two graphs' notes must share besides the counts)

    @property
    def all_graphs(self) -> tuple:
        """``graph`` and the other graphs this note stands for, in order."""
        return (self.graph,) + self.graphs

    @property
    def graph_label(self) -> str:
        """``g0``, ``g0–3`` (consecutive graphs) or ``g0,2,5``."""
        gs = self.all_graphs
        if len(gs) == 1:
            return f"g{gs[0]}"
        if list(gs) == list(range(gs[0], gs[0] + len(gs))):
            return f"g{gs[0]}–{gs[-1]}"
        return "g" + ",".join(str(g) for g in gs)

    def text(self) -> str:
        """Return the note as one line: ``forward 9 ops: 5 in fw_fusion_1 (triton) · on torch: mm
        ×2 (matmuls stay with torch)``."""
        parts = []
        if self.kernels:
            n_fused = self.n_ops - sum(c for _, _, c in self.torch) - sum(c for _, _, c in self.other)
            by_ex: dict = {}
            for name, ex in self.kernels:
                by_ex.setdefault(ex or "?", []).append(name)
            parts.append(f"{n_fused} in " + "; ".join(_kernel_list(names, ex) for ex, names in by_ex.items()))
        if self.torch:
            parts.append("on torch: " + ", ".join(
                f"{op}{f' ×{n}' if n > 1 else ''}{f' ({why})' if why else ''}" for op, why, n in self.torch))
        for op, ex, n in self.other:
            parts.append(f"{op}{f' ×{n}' if n > 1 else ''} on {ex or 'no executor'}")
        head = f"{self.chain} {self.n_ops} op{'s' if self.n_ops != 1 else ''}"
        return head + (": " + " · ".join(parts) if parts else "")

    def as_json(self) -> dict:
        """Return a JSON-ready dict (with ``text``)."""
        return {"graph": self.graph, "graphs": list(self.all_graphs), "graph_label": self.graph_label,
                "chain": self.chain, "n_ops": self.n_ops,
                "kernels": [{"name": n, "executor": e} for n, e in self.kernels],
                "torch": [{"op": o, "reason": r, "count": c} for o, r, c in self.torch],
                "other": [{"op": o, "executor": e, "count": c} for o, e, c in self.other],
                "text": self.text()}


# The prefix codegen gives the kernels of graph N > 0 (``g1_fw_fusion_0``).
_GRAPH_PREFIX = re.compile(r"^g\d+_")


def _same_ops(note: ChainNote) -> tuple:
    """What two graphs' notes of one line must share to be one note: chain, ops, kernels (but for
    their graph prefix) with their executors, the ops on torch and why, the other ops."""
    return (note.chain, note.ops, tuple((_GRAPH_PREFIX.sub("", str(k)), ex) for k, ex in note.kernels),
            note.torch, note.other)


@dataclass(frozen=True)
class SourceLine:
    """One line of a user file: its number, its recorded text, the ops made from it (in graph,
    chain and trace order), their time in µs and share of the profiled time (None: not profiled)."""

    file: str
    line: int
    text: str
    ops: tuple
    time_us: Optional[float]
    share: Optional[float]

    @property
    def label(self) -> str:
        """``train.py:45`` (a notebook cell: ``cell [3]:45``)."""
        return f"{file_label(self.file)}:{self.line}"

    @property
    def kernels(self) -> tuple:
        """The names of the kernels this line's ops ended in, in first-seen order."""
        return tuple(dict.fromkeys(o.kernel for o in self.ops if o.kernel))

    @property
    def kernel_ids(self) -> tuple:
        """The ids of those kernels, same order."""
        return tuple(dict.fromkeys(o.kernel_id for o in self.ops if o.kernel_id is not None))

    @property
    def fallbacks(self) -> tuple:
        """``(op, reason)`` for each distinct fallback of this line's ops."""
        return tuple(dict.fromkeys((o.op, o.fallback) for o in self.ops if o.fallback))

    @property
    def severe_fallbacks(self) -> tuple:
        """``(op, reason)`` for each distinct fallback that is :attr:`LineOp.severe`."""
        return tuple(dict.fromkeys((o.op, o.fallback) for o in self.ops if o.fallback and o.severe))

    @property
    def status(self) -> str:
        """How the line's ops run: ``""`` (no ops), ``fell back`` (a chain ran eagerly or a kernel
        fell back to torch at run time), ``partly torch`` (some ops left to torch, with the reason),
        ``compiled`` (every op in a kernel or run as compiled)."""
        if not self.ops:
            return NO_OPS
        if any(o.severe for o in self.ops):
            return FELL_BACK
        if any(o.fallback for o in self.ops):
            return PARTLY_TORCH
        return COMPILED

    @property
    def uids(self) -> tuple:
        """``(graph, chain, uid)`` of every op, for a view that jumps to them."""
        return tuple((o.graph, o.chain, o.uid) for o in self.ops)

    def notes(self) -> tuple:
        """Return one :class:`ChainNote` per (graph, chain) with ops on this line, the notes of
        graphs whose ops here are the same merged into the first (its ``graphs``)."""
        out: list = []
        first: dict = {}  # _same_ops key -> index in out
        for note in self._chain_notes():
            key = _same_ops(note)
            if key in first:
                kept = out[first[key]]
                out[first[key]] = replace(kept, graphs=kept.graphs + (note.graph,))
            else:
                first[key] = len(out)
                out.append(note)
        return tuple(out)

    def _chain_notes(self) -> list:
        """One :class:`ChainNote` per (graph, chain) with ops on this line, in op order."""
        groups: dict = {}
        for o in self.ops:
            groups.setdefault((o.graph, o.chain), []).append(o)
        out = []
        for (graph, chain), ops in groups.items():
            kernels = tuple(dict.fromkeys((o.kernel, f"{o.executor} · {o.ran_on}" if o.ran_on else o.executor)
                                          for o in ops if o.kernel))
            torch = Counter((o.op, o.fallback or "") for o in ops if not o.kernel and o.executor in ("torch", None)
                            and (o.executor == "torch" or o.fallback))
            other = Counter((o.op, o.executor) for o in ops if not o.kernel
                            and (o.op, o.fallback or "") not in torch)
            out.append(ChainNote(graph, chain, len(ops), kernels,
                                 tuple((op, why, n) for (op, why), n in torch.items()),
                                 tuple((op, ex, n) for (op, ex), n in other.items()),
                                 ops=tuple(o.op for o in ops)))
        return tuple(out)

    def time_text(self) -> str:
        """``3.21 ms · 12.4%`` (empty when not profiled or no time was measured here)."""
        if not self.time_us:
            return ""
        return f"{format_us(self.time_us)} · {format_share(self.share or 0)}"

    def as_json(self) -> dict:
        """Return a JSON-ready dict (``notes`` carries each chain's one-line text)."""
        return {"file": self.file, "line": self.line, "label": self.label, "text": self.text,
                "ops": [o.as_json() for o in self.ops], "kernels": list(self.kernels),
                "kernel_ids": list(self.kernel_ids),
                "fallbacks": [{"op": op, "reason": r} for op, r in self.fallbacks],
                "notes": [n.as_json() for n in self.notes()], "time_us": self.time_us,
                "share": self.share, "share_text": format_share(self.share) if self.share is not None else "",
                "time_text": self.time_text(), "status": self.status}


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
        parts = [self.label + (f" · graph {self.graph}" if self.graph is not None else ""),
                 f"{len(self.annotated)} of {len(self.lines)} lines made {len(ops)} ops"
                 f" in {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"]
        if n_torch:
            parts.append(f"{n_torch} on torch")
        if not self.recorded:
            parts.append("file text not recorded")
        if self.profiled:
            parts.append(f"profiled: {format_us(self.total_us)} per step")
        return " · ".join(parts)

    def graph_options(self) -> list[tuple[Optional[int], str]]:
        """Return the graph picker's choices, (graph id or None for all, label): ``all graphs · 496
        ops``, then ``graph 0 · 480 ops`` per graph (``no ops from this file`` where it made none)."""
        def ops(n: int) -> str:
            return f"{n} op{'s' if n != 1 else ''}" if n else "no ops from this file"
        return [(None, f"all graphs · {ops(sum(n for _, n in self.graph_ops))}")] + \
            [(g, f"graph {g} · {ops(n)}") for g, n in self.graph_ops]

    def as_json(self) -> dict:
        """Return a JSON-ready dict (what ``thundervis source --json`` prints and the widget sends;
        ``graph_options``: :meth:`graph_options` as ``{"graph", "label"}``)."""
        return {"file": self.file, "label": self.label, "recorded": self.recorded, "graph": self.graph,
                "total_us": self.total_us, "summary": self.summary(), "files": list(self.files),
                "graph_options": [{"graph": g, "label": text} for g, text in self.graph_options()],
                "lines": [x.as_json() for x in self.lines]}


def recorded_files(rec) -> list[str]:
    """Return the user files the recording holds (with or without their text), sorted."""
    return list(rec.source_files())


def default_file(rec) -> Optional[str]:
    """Return the file a Source view opens on: the run's script when its text is recorded, else the
    first recorded file (None when there is none)."""
    files = recorded_files(rec)
    script = rec.run().script
    return script if script in files else (files[0] if files else None)


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
    for g in rec.graphs():
        shown = graph is None or g.id == graph
        found, g_total, g_profiled = _graph_ops(rec, g, timings, fell_back, runs)
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
    text = rec.source_text(file)
    recorded = text is not None
    numbers = range(1, len(text.splitlines()) + 1) if recorded else sorted(by_line)
    text_lines = text.splitlines() if recorded else []
    extra = sorted(n for n in by_line if recorded and n > len(text_lines))  # file changed after the run
    rows = []
    for n in list(numbers) + extra:
        ops = tuple(by_line.get(n, ()))
        code = text_lines[n - 1] if recorded and n <= len(text_lines) else codes.get(n, "")
        t = sum(o.time_us for o in ops if o.time_us is not None) if profiled and ops else None
        if t is not None and not any(o.time_us is not None for o in ops):
            t = None
        rows.append(SourceLine(file, n, code, ops, t, (t / total) if t is not None and total > 0 else None))
    return SourceFile(file, recorded, graph, tuple(rows), total if profiled else None,
                      tuple(recorded_files(rec)), tuple(graph_ops))


def _graph_ops(rec, g, timings, fell_back: dict, runs: dict) -> tuple[list, float, bool]:
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
        found.extend(_chain_ops(rec, g, c, fell_back, timing, runs))
    return found, total, profiled
