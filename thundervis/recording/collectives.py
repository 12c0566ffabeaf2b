"""The collectives a run issued between its compiled graphs, as rows for the views.

``thundervis run`` records every collective that runs outside the compiled graphs (DDP's reducer,
FSDP2's hooks, the script's own ``torch.distributed`` calls) as a ``collective`` event, placed
between the compiled chain call that ran last before it and the one that ran next after it, and
the counts of the whole run as one ``collective_summary`` event (see
``thundervis/collective_watch.py``). Collectives traced INTO a graph are ops of its traces
(``thundervis.compiler.collectives``) and are counted by :func:`trace_communication_ops`.

Everything here reads through the reader API and checks every recorded field (a recording is
untrusted input): :func:`collectives` returns :class:`Collective` rows in the order they ran,
:func:`collective_counts` the run's :class:`CollectiveCounts`, :func:`around_chain` the rows run
right before and right after one chain. Their text is :mod:`thundervis.present.collectives`'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .model import ChainRef
from .reader import Recording, RecordingError

EVENT, SUMMARY = "collective", "collective_summary"
EXECUTED_CHAINS = ("forward", "backward", "inference")


@dataclass(frozen=True, order=True)
class ChainCall(ChainRef):
    """One call of a compiled chain: graph id, chain kind, and which call of that chain (1-based)."""

    call: int

    def __str__(self) -> str:
        return f"graph {self.graph} {self.chain} call {self.call}"

    def as_json(self) -> dict:
        """Return the call as a JSON-ready dict."""
        return {"graph": self.graph, "chain": self.chain, "call": self.call}


@dataclass(frozen=True)
class Collective:
    """One collective run between compiled graphs: ``seq`` (its place among them, from 0), ``op``
    (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``barrier`` ...), the
    ``c10d_op`` that ran it, the process group's size, name and backend, ``inputs`` and ``outputs``
    as ``(shape, dtype)`` pairs, ``bytes`` (the larger of its inputs and outputs), ``async_op``,
    ``duration_ms`` (issue to completion; None when unknown), ``step`` (0: before the first chain
    call, then 1, 2 ...: calls of the run's first chain), ``after`` / ``before``: the chain calls
    around it (None: none before / none after), ``issuer`` (the torch frame that issued it,
    ``script`` for the user's own call) and ``source`` (the user's line, ``file.py:LINE``)."""

    seq: int
    op: str
    c10d_op: str
    group_size: Optional[int]
    group: Optional[str]
    backend: Optional[str]
    inputs: tuple
    outputs: tuple
    bytes: int
    async_op: bool
    duration_ms: Optional[float]
    step: int
    after: Optional[ChainCall]
    before: Optional[ChainCall]
    issuer: Optional[str]
    source: Optional[str]

    @property
    def issued_by(self) -> str:
        """Who issued it: ``fsdp``, ``ddp``, ``backward`` (C++ code during the backward: DDP's
        reducer), ``script`` or ``torch``."""
        return issuer_kind(self.issuer)

    def as_json(self) -> dict:
        """Return the row as a JSON-ready dict."""
        return {"seq": self.seq, "op": self.op, "c10d_op": self.c10d_op, "group_size": self.group_size,
                "group": self.group, "backend": self.backend,
                "inputs": [[list(s), d] for s, d in self.inputs],
                "outputs": [[list(s), d] for s, d in self.outputs],
                "bytes": self.bytes, "async": self.async_op, "duration_ms": self.duration_ms, "step": self.step,
                "after": self.after.as_json() if self.after else None,
                "before": self.before.as_json() if self.before else None,
                "issuer": self.issuer, "issued_by": self.issued_by, "source": self.source}


@dataclass(frozen=True)
class CollectiveCounts:
    """How many collectives a run issued between its compiled graphs (``between_graphs``; from the
    summary when the run ended, else the rows recorded so far: ``complete`` False), how many are
    listed in full (``recorded``), per op (``by_op``: op -> count, ``bytes_by_op``: op -> bytes),
    and how many the watcher saw while a compiled chain ran (``in_graphs_run``; the functional
    collectives traced into graphs are usually not seen: :func:`trace_communication_ops` counts them)."""

    between_graphs: int
    recorded: int
    by_op: dict
    bytes_by_op: dict
    in_graphs_run: int
    complete: bool

    def as_json(self) -> dict:
        """Return the counts as a JSON-ready dict."""
        return {"between_graphs": self.between_graphs, "recorded": self.recorded, "by_op": dict(self.by_op),
                "bytes_by_op": dict(self.bytes_by_op), "in_graphs_run": self.in_graphs_run,
                "complete": self.complete}


def issuer_kind(frame: Optional[str]) -> str:
    """Return who issued a collective from its recorded issuing frame (``torch/...py:LINE func`` or
    ``script``): ``fsdp``, ``ddp``, ``backward`` (C++ code during the backward, such as DDP's
    reducer), ``script`` or ``torch``."""
    if not frame:
        return "torch"
    if frame == "script":
        return "script"
    path = frame.replace("\\", "/")
    if "/distributed/fsdp/" in path:
        return "fsdp"
    if path.startswith("torch/nn/parallel/") or "/ddp_comm_hooks/" in path:
        return "ddp"
    if path.startswith(("torch/autograd/", "torch/_tensor.py")):
        return "backward"
    return "torch"


def _int(v, default=None):
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _text(v) -> Optional[str]:
    return v if isinstance(v, str) else None


def _call(v) -> Optional[ChainCall]:
    if not isinstance(v, dict):
        return None
    g, c, n = _int(v.get("graph")), _text(v.get("chain")), _int(v.get("call"))
    if g is None or c is None or n is None:
        return None
    return ChainCall(g, c, n)


def _tensors(v) -> tuple:
    out = []
    for item in v if isinstance(v, list) else []:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and isinstance(item[1], str) \
                and all(_int(s) is not None for s in item[0]):
            out.append((tuple(item[0]), item[1]))
    return tuple(out)


def _row(d: dict) -> Optional[Collective]:
    seq, op = _int(d.get("seq")), _text(d.get("op"))
    if seq is None or op is None:
        return None
    duration = d.get("duration_ms")
    duration = float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
    return Collective(seq, op, _text(d.get("c10d_op")) or op, _int(d.get("group_size")), _text(d.get("group")),
                      _text(d.get("backend")), _tensors(d.get("inputs")), _tensors(d.get("outputs")),
                      _int(d.get("bytes"), 0), d.get("async") is True,
                      duration,
                      _int(d.get("step"), 0), _call(d.get("after")), _call(d.get("before")),
                      _text(d.get("issuer")), _text(d.get("source")))


def collectives(rec: Recording) -> list[Collective]:
    """Return every collective recorded in full between compiled graphs, in the order they ran."""
    rows = [_row(e.data) for e in rec.events(EVENT) if isinstance(e.data, dict)]
    return sorted((r for r in rows if r is not None), key=lambda r: r.seq)


def _summary(rec: Recording) -> Optional[dict]:
    found = [e.data for e in rec.events(SUMMARY) if isinstance(e.data, dict)]
    return found[-1] if found else None


def collective_counts(rec: Recording, rows: Optional[list] = None) -> CollectiveCounts:
    """Return the run's :class:`CollectiveCounts` (``rows``: :func:`collectives`, when already read)."""
    rows = collectives(rec) if rows is None else rows
    summary = _summary(rec)
    by_op: dict = {}
    nbytes: dict = {}
    if summary is not None:
        for item in summary.get("by_op") or []:
            if isinstance(item, dict) and isinstance(item.get("op"), str):
                by_op[item["op"]] = by_op.get(item["op"], 0) + _int(item.get("count"), 0)
                nbytes[item["op"]] = nbytes.get(item["op"], 0) + _int(item.get("bytes"), 0)
        in_graphs = sum(_int(i.get("count"), 0) for i in summary.get("in_graphs") or [] if isinstance(i, dict))
        return CollectiveCounts(_int(summary.get("between_graphs"), 0), len(rows), by_op, nbytes, in_graphs, True)
    for r in rows:
        by_op[r.op] = by_op.get(r.op, 0) + 1
        nbytes[r.op] = nbytes.get(r.op, 0) + r.bytes
    return CollectiveCounts(len(rows), len(rows), by_op, nbytes, 0, False)


def around_chain(rows: list, graph: int, chain: str) -> tuple[list, list]:
    """Return (rows run right before a call of ``chain`` of ``graph``, rows run right after one),
    from :func:`collectives` rows."""
    before = [r for r in rows if r.before is not None and (r.before.graph, r.before.chain) == (graph, chain)]
    after = [r for r in rows if r.after is not None and (r.after.graph, r.after.chain) == (graph, chain)]
    return before, after


def trace_communication_ops(rec: Recording) -> int:
    """Return how many communication ops (collectives and their waits) the last pass of every
    forward, backward and inference chain holds: the collectives traced into the graphs."""
    from thundervis.compiler.collectives import COMMUNICATION_NAMESPACES
    from .symbol_rows import top_level_in_namespaces
    rule = top_level_in_namespaces(COMMUNICATION_NAMESPACES)
    n = 0
    for g in rec.graphs():
        for c in g.chains:
            if c.kind not in EXECUTED_CHAINS or not c.passes:
                continue
            try:
                n += len(rec.matching_symbols(c.passes[-1].ref, rule))
            except RecordingError:
                continue
    return n


@dataclass(frozen=True)
class CollectivePlace:
    """Where collectives ran, over the whole run: after a chain (``after``: (graph, chain), None
    before any chain ran) and before one (``before``; None: the run ended), the op, how many ran
    there and their bytes."""

    after: Optional[tuple]
    before: Optional[tuple]
    op: str
    count: int
    bytes: int

    def as_json(self) -> dict:
        """Return the place as a JSON-ready dict."""
        def side(v):
            return None if v is None else {"graph": v[0], "chain": v[1]}
        return {"after": side(self.after), "before": side(self.before), "op": self.op, "count": self.count,
                "bytes": self.bytes}


def _side(v) -> Optional[tuple]:
    if isinstance(v, dict) and _int(v.get("graph")) is not None and isinstance(v.get("chain"), str):
        return (v["graph"], v["chain"])
    return None


def collective_places(rec: Recording) -> list[CollectivePlace]:
    """Return where the run's collectives between graphs ran, with counts (from the summary the
    run wrote when it ended; empty when it has none), the busiest first."""
    summary = _summary(rec)
    out = []
    for item in (summary or {}).get("places") or []:
        if isinstance(item, dict) and isinstance(item.get("op"), str):
            out.append(CollectivePlace(_side(item.get("after")), _side(item.get("before")), item["op"],
                                       _int(item.get("count"), 0), _int(item.get("bytes"), 0)))
    return sorted(out, key=lambda p: (-p.count, str(p.after), str(p.before), p.op))


def count_between(events) -> int:
    """Return how many collectives ran between compiled graphs from ``(event name, decoded data)``
    pairs: the summary's count when the run wrote one, else the collectives recorded one by one."""
    rows = summary = 0
    found = False
    for name, data in events:
        if name == SUMMARY and isinstance(data, dict):
            summary, found = _int(data.get("between_graphs"), 0), True
        elif name == EVENT and isinstance(data, dict):
            rows += 1
    return summary if found else rows


def first_call_collectives(rec: Recording, graph: int, chain: str) -> tuple[list, list]:
    """Return (collectives run right before the first call of ``chain`` of ``graph``, those run
    right after it) as :class:`Collective` rows, for diagrams."""
    before, after = around_chain(collectives(rec), graph, chain)
    return [r for r in before if r.before.call == 1], [r for r in after if r.after.call == 1]


def rows_by_place(rows: list) -> list[tuple[Optional[tuple], Optional[tuple], list]]:
    """Return :func:`collectives` rows grouped by where they ran, as ``(after, before, rows)``
    (``after`` / ``before``: the ``(graph, chain)`` around them, None at the run's start / end),
    places in the order their first collective ran, rows in the order they ran."""
    groups: dict = {}
    for r in rows:
        key = ((r.after.graph, r.after.chain) if r.after else None,
               (r.before.graph, r.before.chain) if r.before else None)
        groups.setdefault(key, []).append(r)
    return [(a, b, found) for (a, b), found in groups.items()]
