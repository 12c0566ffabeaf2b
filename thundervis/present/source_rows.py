"""The rows of the Source view (:mod:`.source_view`): one line of a user file (:class:`SourceLine`),
each op made from it (:class:`LineOp`) and what each chain made of it (:class:`ChainNote`), with the
rules of how they read (status, notes merged across graphs, kernel lists). Rows hold raw recorded
strings; the views make them visible."""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Optional

from .status import EAGER, KERNEL
from .units import format_bytes, format_share, format_us

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
    # present.eager_regions wordings of the code Dynamo left to eager that covers this line
    eager: tuple = ()
    # bytes of the tensors made on this line that the forward saves for the backward (the memory
    # ledger, counted like saved_tensors_hooks); None: the recording has no ledger
    saved_bytes: Optional[int] = None

    def saved_text(self) -> str:
        """``saved 1.05 MB`` (empty when nothing made here is saved, or no ledger)."""
        return f"saved {format_bytes(self.saved_bytes)}" if self.saved_bytes else ""

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
                "time_text": self.time_text(), "status": self.status, "eager": list(self.eager),
                "saved_bytes": self.saved_bytes, "saved_text": self.saved_text()}
