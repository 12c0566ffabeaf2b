"""The view model's rows of a run: where a pass is, the run, its graphs, chains, passes, failures,
kernels and events, and the :class:`Overview` of them all (what ``ls`` shows).

Part of the view model (:mod:`thundervis.recording.model`, which re-exports every name): frozen
values built by the reader, each with ``as_json()``; nothing here touches SQL, torch or the file.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from .model_timings import KernelTiming, Timings

CHAIN_ORDER = ("dynamo", "joint", "forward", "backward", "inference")


def chain_position(kind: str) -> int:
    """Return where a chain kind sorts in compile order (its index in ``CHAIN_ORDER``; an unknown
    kind after every known one, 99): the one chain order every view and tool sorts by."""
    return CHAIN_ORDER.index(kind) if kind in CHAIN_ORDER else 99


def source_label(file: Optional[str], line: Optional[int]) -> str:
    """Return ``train.py:42`` (the file's base name and the line)."""
    return f"{os.path.basename(str(file or '?'))}:{line}"


# ------------------------------------------------------------------------------------- places

@dataclass(frozen=True, order=True)
class ChainRef:
    """Which chain: graph id and chain kind. What :class:`PassRef` and
    ``collectives.ChainCall`` (a place in that chain) start with."""

    graph: int
    chain: str


@dataclass(frozen=True, order=True)
class PassRef(ChainRef):
    """Where one pass is: graph id, chain kind, pass index."""

    index: int

    def as_json(self) -> dict:
        """Return ``{"graph", "chain", "index"}``."""
        return {"graph": self.graph, "chain": self.chain, "index": self.index}

    def __str__(self) -> str:
        return f"graph {self.graph} {self.chain} pass {self.index}"


@dataclass(frozen=True, order=True)
class Revision:
    """What a viewer compares to know whether to reload: SQLite's ``data_version`` of the reader's
    polling connection (changes when another process commits) and the run's status."""

    data_version: int
    status: str

    def as_json(self) -> dict:
        """Return ``{"data_version", "status"}``."""
        return {"data_version": self.data_version, "status": self.status}


# ---------------------------------------------------------------------------------- the run

@dataclass(frozen=True)
class Run:
    """What ran: script or module, argv, cwd, versions, device, times, status and traceback.

    ``status``: running, ok, failed, interrupted, or killed (the reader's verdict for a run whose
    process is gone without ending it)."""

    script: Optional[str]
    module: Optional[str]
    argv: list
    cwd: str
    python: Optional[str]
    torch: Optional[str]
    triton: Optional[str]
    thundervis: Optional[str]
    device: Optional[str]
    executors: Optional[list]
    started_at: float
    ended_at: Optional[float]
    status: str
    exit_code: Optional[int]
    traceback: Optional[str]
    pid: Optional[int]
    host: Optional[str] = None
    # What the run recorded last, in words (set when the status is ``killed``).
    last_event: Optional[str] = None

    @property
    def target(self) -> str:
        """Return the script path, or ``-m MODULE``."""
        return self.script if self.script else f"-m {self.module}"

    @property
    def duration_s(self) -> Optional[float]:
        """Seconds from start to end (None while running)."""
        return (self.ended_at - self.started_at) if self.ended_at else None

    def as_json(self) -> dict:
        """Return the ``run`` object of ``ls --json``."""
        return {"script": self.script, "module": self.module, "argv": self.argv, "cwd": self.cwd,
                "status": self.status, "exit_code": self.exit_code, "started_at": self.started_at,
                "ended_at": self.ended_at, "duration_s": self.duration_s, "device": self.device,
                "executors": self.executors, "python": self.python, "torch": self.torch,
                "triton": self.triton, "thundervis": self.thundervis, "traceback": self.traceback,
                "pid": self.pid, "host": self.host, "last_event": self.last_event}


# ------------------------------------------------------------------------------------ kernels

@dataclass(frozen=True)
class KernelRef:
    """Which kernel: its id in the recording, graph, chain, name, executor and the uid of its
    fusion symbol (None when not recorded). The fields :class:`KernelInfo` and the kernel table's
    rows (``present.kernel_rows.KernelRow``) start with."""

    id: int
    graph: int
    chain: str
    name: str
    executor: str
    uid: Optional[str]


@dataclass(frozen=True)
class KernelInfo(KernelRef):
    """A kernel a fusion executor built (the compiler's kernel record), without its code: which
    kernel (:class:`KernelRef`), the pass that built it, member uids and op names, input/output
    tensor metadata (dicts: name, shape, dtype, device, strides), the user source lines it covers
    (dicts: file, line, code, module, direction), a note, and its timing when profiled."""

    pass_name: Optional[str]
    language: Optional[str]
    members: tuple
    ops: tuple
    inputs: tuple
    outputs: tuple
    source_lines: tuple
    note: Optional[str]
    timing: Optional[KernelTiming] = None

    @property
    def n_ops(self) -> int:
        """Number of member ops."""
        return len(self.ops)

    @property
    def sources(self) -> list[str]:
        """The covered source lines as sorted ``file:line`` labels (base names)."""
        return sorted({source_label(s.get("file"), s.get("line")) for s in self.source_lines
                       if isinstance(s, dict)})

    @property
    def device(self) -> str:
        """The device it was recorded on (from its tensor metadata; ``cpu`` when unknown). Only a
        device spelled as the IR's allow-list has it (``cpu``, ``cuda:N``...): the string reaches
        ``torch.device`` in rerun and in repro scripts."""
        from thundervis.compiler.values import DEVICE
        for m in tuple(self.inputs) + tuple(self.outputs):
            if isinstance(m, dict) and isinstance(m.get("device"), str) and DEVICE.fullmatch(m["device"]):
                return m["device"]
        return "cpu"

    def as_json(self) -> dict:
        """Return the kernel as JSON: the ``fusions[]`` item of ``ls --json`` (name, executor,
        chain, uid, n_ops, sources, timing) plus id, graph, pass, language, ops, members, inputs,
        outputs, source_lines and note."""
        return {"id": self.id, "graph": self.graph, "name": self.name, "executor": self.executor,
                "chain": self.chain, "uid": self.uid, "n_ops": self.n_ops, "sources": self.sources,
                "timing": self.timing.as_json() if self.timing else None, "pass": self.pass_name,
                "language": self.language, "ops": list(self.ops), "members": list(self.members),
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "source_lines": list(self.source_lines), "note": self.note}


@dataclass(frozen=True)
class KernelSource:
    """The heavy part of a kernel record, loaded on request: the generated code (data, never
    executed by viewers) and the JSON of a standalone trace of the region (what ``rerun`` and
    ``repro`` rebuild the kernel from)."""

    kernel_id: int
    name: str
    language: Optional[str]
    code: Optional[str]
    trace_json: Optional[str]

    def as_json(self) -> dict:
        """Return ``{"kernel_id", "name", "language", "code"}`` (the IR stays out)."""
        return {"kernel_id": self.kernel_id, "name": self.name, "language": self.language, "code": self.code}


# ------------------------------------------------------------------------- graphs and passes

@dataclass(frozen=True)
class PassInfo:
    """One pass of one chain (without its trace; see :meth:`Recording.pass_text`)."""

    graph: int
    chain: str
    index: int
    name: str
    duration_ms: float
    changed: bool
    n_symbols: int

    @property
    def ref(self) -> PassRef:
        """Where this pass is."""
        return PassRef(self.graph, self.chain, self.index)

    def as_json(self) -> dict:
        """Return the ``passes[]`` item of ``ls --json``."""
        return {"index": self.index, "name": self.name, "ms": round(self.duration_ms, 4),
                "changed": self.changed, "n_symbols": self.n_symbols}


class UnknownItem(LookupError):
    """A graph, chain, pass, kernel or symbol that the recording does not hold; the message names
    the valid choices."""


@dataclass(frozen=True)
class Chain:
    """A chain of a graph (dynamo, joint, forward, backward, inference) and its passes."""

    graph: int
    kind: str
    status: str  # compiling | compiled | failed
    error: Optional[str]
    passes: tuple[PassInfo, ...]

    def find_pass(self, which) -> PassInfo:
        """Return the pass with index ``which`` (int or digits) or name ``which``; raise
        :class:`UnknownItem` naming the valid choices."""
        for p in self.passes:
            if str(p.index) == str(which) or p.name == str(which):
                return p
        choices = ", ".join(f"{p.index} {p.name}" for p in self.passes) or "none recorded"
        raise UnknownItem(f"graph {self.graph} {self.kind} has no pass {which!r} (passes: {choices})")

    @property
    def last(self) -> Optional[PassRef]:
        """The last recorded pass (None when there is none)."""
        return self.passes[-1].ref if self.passes else None

    def as_json(self) -> dict:
        """Return the ``chains[]`` item of ``ls --json``."""
        return {"kind": self.kind, "status": self.status, "error": self.error,
                "passes": [p.as_json() for p in self.passes]}


@dataclass(frozen=True)
class Failure:
    """A compile or first-call failure; the chain (None: the whole graph) ran eagerly."""

    graph: int
    chain: Optional[str]
    error: str
    traceback: Optional[str]

    def as_json(self) -> dict:
        """Return the ``failures[]`` item of ``ls --json``."""
        return {"chain": self.chain, "error": self.error}


@dataclass(frozen=True)
class Graph:
    """A compiled Dynamo graph: why it was compiled, compile time, chains, failures, kernels (no
    code) and timings."""

    id: int
    compile_id: Optional[str]
    reason: Optional[str]
    recompile_reason: Optional[str]
    graph_break_reason: Optional[str]
    n_inputs: Optional[int]
    n_nodes: Optional[int]
    compile_s: Optional[float]
    chains: tuple[Chain, ...]
    failures: tuple[Failure, ...]
    kernels: tuple[KernelInfo, ...]
    timings: Timings = field(default_factory=Timings)

    def chain(self, kind: str) -> Chain:
        """Return the chain ``kind``; raise :class:`UnknownItem` naming the valid choices."""
        for c in self.chains:
            if c.kind == kind:
                return c
        choices = ", ".join(c.kind for c in self.chains) or "none recorded"
        raise UnknownItem(f"graph {self.id} has no {kind!r} chain (chains: {choices})")

    def as_json(self) -> dict:
        """Return the ``graphs[]`` item of ``ls --json``."""
        return {"id": self.id, "compile_id": self.compile_id, "reason": self.reason,
                "recompile_reason": self.recompile_reason, "graph_break_reason": self.graph_break_reason,
                "compile_ms": self.compile_s * 1e3 if self.compile_s is not None else None,
                "n_inputs": self.n_inputs, "n_nodes": self.n_nodes,
                "chains": [c.as_json() for c in self.chains],
                "fusions": [k.as_json() for k in self.kernels],
                "timings": self.timings.as_json(),
                "failures": [f.as_json() for f in self.failures]}


@dataclass(frozen=True)
class Overview:
    """Everything ``ls`` shows, in one read: the run, every graph (chains, passes, failures,
    kernels without code, timings), the run's status and the :class:`Revision` it was read at."""

    path: str
    schema: int
    run: Run
    graphs: tuple[Graph, ...]
    revision: Revision

    @property
    def status(self) -> str:
        """The run's status (running, ok, failed, interrupted, killed)."""
        return self.run.status

    def graph(self, graph_id: int) -> Graph:
        """Return graph ``graph_id``; raise :class:`UnknownItem` naming the recorded graphs."""
        for g in self.graphs:
            if g.id == graph_id:
                return g
        ids = ", ".join(str(g.id) for g in self.graphs) or "none recorded"
        raise UnknownItem(f"no graph {graph_id} in this recording (graphs: {ids})")

    def as_json(self) -> dict:
        """Return the ``ls --json`` document (docs/recording.md)."""
        return {"schema": self.schema, "path": self.path, "status": self.status,
                "revision": self.revision.as_json(), "run": self.run.as_json(),
                "graphs": [g.as_json() for g in self.graphs]}


# ------------------------------------------------------------------------------------- events

@dataclass(frozen=True)
class Event:
    """A runtime event or note (``data`` is decoded JSON)."""

    graph: Optional[int]
    chain: Optional[str]
    event: str
    data: object
    at: float

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"graph": self.graph, "chain": self.chain, "event": self.event, "data": self.data, "at": self.at}
