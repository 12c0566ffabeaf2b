"""Chain and kernel status (ran eagerly, fell back at run time, why), and every fallback of a
recorded run, each with the source line it concerns: the one owner of these rules for every view.

A fallback is work that did not run the way the compiled trace says, or ran in torch instead of
a generated kernel:

- ``eager``: a chain (or a whole graph) whose compile or first call failed, so it ran eagerly
  (the ``failures`` table);
- ``kernel``: a generated kernel that failed at run time and ran its region in torch instead
  (``kernel_fallback`` events);
- ``recompile limit``: Dynamo gave up compiling a function after its recompile limit and runs it
  eagerly from then on (``dynamo_recompile_limit`` events);
- ``not traced``: Dynamo could not trace a function at all (an RNN module, a graph break it cannot
  resume from), so it runs eagerly and no graph of it was ever compiled (``dynamo_frame_failed``
  events);
- ``torch op``: an op of a compiled chain that the torch executor runs, with the note saying why
  (not lowered to prims, or not claimed by a fusion executor).

:func:`chain_eager` / :func:`graph_eager` say whether (and why) a chain or graph ran eagerly;
:func:`fallbacks` lists them all through
the reader API; :func:`chain_counts` counts eager chains.

What ran each kernel, where (:func:`kernel_runs`, :func:`ran_on_text`, :func:`kernel_label` ...),
and the reader of run-time kernel fallbacks (:func:`kernel_fallbacks`) are :mod:`.kernel_runs`,
re-exported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from thundervis.recording import TORCH_NOTED, Recording, RecordingError, UnknownItem

# What ran each kernel, and run-time kernel fallbacks, are .kernel_runs' (re-exported: every view
# has read them from here).
from .kernel_runs import (DEVICES, FELL_BACK_TEXT, PATHS, KernelFallback, KernelRun, built_targets,  # noqa: F401
                          clock_label, kernel_fallbacks, kernel_label, kernel_runs, kernel_tag, path_text,
                          plan_note, ran_on_text, run_from_event, source_label, tag_text)

EXECUTED_CHAINS = ("forward", "backward", "inference")
EAGER, KERNEL, RECOMPILE_LIMIT, NOT_TRACED, TORCH_OP = "eager", "kernel", "recompile limit", "not traced", "torch op"


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


def _one_line(text) -> str:
    lines = str(text or "").strip().splitlines()
    return " ".join(lines[0].split()) if lines else ""


def _first_source(rec: Recording, graph: int, chains) -> Optional[str]:
    """Return the first source line recorded for ``graph`` in the first of ``chains`` that has one."""
    try:
        g = rec.graph(graph)
    except UnknownItem:
        return None
    for c in chains_with_passes(g, chains):
        try:
            for s in rec.symbols(graph, c.kind, c.passes[0].index):
                if s.source is not None and s.source.line:
                    return source_label(s.source.file, s.source.line)
        except RecordingError:
            continue
    return None


def chains_with_passes(graph, kinds: Iterable[str]):
    """Yield the chains of ``graph`` named in ``kinds``, in that order, that hold recorded passes."""
    for kind in kinds:
        try:
            c = graph.chain(kind)
        except UnknownItem:
            continue
        if c.passes:
            yield c


def graph_eager(graph) -> Optional[str]:
    """Return why ``graph`` (a ``recording.model.Graph``) ran eagerly as a whole (its failure
    before any chain), or None."""
    return next((f.error or "the graph failed to compile" for f in graph.failures if f.chain is None), None)


def chain_eager(graph, chain) -> Optional[str]:
    """Return why ``chain`` of ``graph`` ran eagerly, or None when it ran compiled: the graph's own
    failure, the chain's recorded failure, or its failed status."""
    why = graph_eager(graph)
    if why is not None:
        return why
    why = next((f.error for f in graph.failures if f.chain == chain.kind), None)
    if why is None and chain.status == "failed":
        why = chain.error or "the chain failed to compile"
    return why


@dataclass(frozen=True)
class ChainStatus:
    """How one chain ran: ``status`` as recorded (compiling, compiled, failed) and ``eager``, why it
    ran eagerly (None: it ran compiled)."""

    graph: int
    chain: str
    status: str
    eager: Optional[str]

    def as_json(self) -> dict:
        """Return ``{"graph", "chain", "status", "eager"}``."""
        return {"graph": self.graph, "chain": self.chain, "status": self.status, "eager": self.eager}


def chain_status(graph, chain) -> ChainStatus:
    """Return the :class:`ChainStatus` of ``chain`` of ``graph``."""
    return ChainStatus(graph.id, chain.kind, chain.status, chain_eager(graph, chain))


def compile_options_not_used(events) -> list[str]:
    """Return the ``torch.compile`` options a ``thundervis run`` overrode (``backend='inductor'``,
    ``mode='max-autotune'``: Inductor's, not ours), each once, in the order first seen: the one
    reader of ``compile_options_dropped`` events."""
    seen: list[str] = []
    for e in events:
        if e.event != "compile_options_dropped" or not isinstance(e.data, dict):
            continue
        for key, value in e.data.items():
            text = f"{key}={value!r}" if isinstance(value, str) else None
            if isinstance(key, str) and text and text not in seen:
                seen.append(text)
    return seen


def fallback_reasons(events) -> dict:
    """Return ``{(graph, chain, kernel name): error}`` for the kernels that fell back at run time."""
    return {(f.graph, f.chain, f.kernel): f.error for f in kernel_fallbacks(events)}


def chain_counts(rec_or_graphs) -> tuple[int, int]:
    """Return (chains that ran eagerly, chains) over the forward, backward and inference chains of
    every graph (of a ``Recording``, or a list of its graphs); a graph that failed before any chain
    counts as one eager chain."""
    eager = total = 0
    graphs = rec_or_graphs.graphs() if hasattr(rec_or_graphs, "graphs") else rec_or_graphs
    for g in graphs:
        chains = [c for c in g.chains if c.kind in EXECUTED_CHAINS]
        if not chains and graph_eager(g) is not None:
            eager, total = eager + 1, total + 1
            continue
        total += len(chains)
        eager += sum(1 for c in chains if chain_eager(g, c) is not None)
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
    for k in kernel_fallbacks(rec.events("kernel_fallback")):
        out.append(Fallback(KERNEL, k.graph, k.chain, f"{k.executor} kernel {k.kernel} ran in torch", k.error,
                            ", ".join(k.sources[:3]) or None, k.uid))
    out += recorded_dynamo_fallbacks(rec)
    if ops:
        for g in graphs:
            for c in g.chains:
                if c.kind not in EXECUTED_CHAINS or c.status != "compiled" or not c.passes:
                    continue
                try:
                    symbols = rec.matching_symbols(c.passes[-1].ref, TORCH_NOTED)
                except RecordingError:
                    continue
                for s in symbols:
                    src = source_label(s.source.file, s.source.line) if s.source else None
                    out.append(Fallback(TORCH_OP, g.id, c.kind, s.sym, _one_line(s.note), src, s.uid))
    return out


def dynamo_fallbacks(events) -> list[Fallback]:
    """Return the functions Dynamo runs eagerly, from the recording's events, in order: after its
    recompile limit (:data:`RECOMPILE_LIMIT`, with the last guard failure) and those it could not
    trace at all (:data:`NOT_TRACED`, with Dynamo's reason, where it stopped in the user's code, else
    where the function starts), except one whose error ended the script (a ``dynamo_raised`` event
    with its type and text: ``fullgraph=True``). Other events are ignored; recorded fields are
    validated."""
    out: list[Fallback] = []
    events = list(events)
    # A failure the script died of (fullgraph=True) did not run eagerly: the traceback says it.
    raised = {_failure_key(e.data) for e in events if e.event == "dynamo_raised" and isinstance(e.data, dict)}
    for e in events:
        d = e.data if isinstance(e.data, dict) else {}
        if e.event == "dynamo_frame_failed" and _failure_key(d) in raised:
            continue
        if e.event == "dynamo_recompile_limit":
            reason = f"hit {d.get('limit_type')} ({d.get('limit')})"
            last = _one_line(d.get("reason")).split("#")[0].strip()
            if last:
                reason += f"; last guard failure: {last}"
            out.append(Fallback(RECOMPILE_LIMIT, None, None, f"Dynamo runs {d.get('function')} eagerly", reason,
                                source_label(d.get("file"), d.get("line"))))
        elif e.event == "dynamo_frame_failed":
            where = source_label(d.get("at_file"), _int(d.get("at_line"))) or source_label(d.get("file"), _int(d.get("line")))
            out.append(Fallback(NOT_TRACED, None, None, f"Dynamo runs {d.get('function')} eagerly",
                                dynamo_reason(d.get("reason"), d.get("fail_type")), where))
    return out


def _failure_key(d: dict) -> tuple:
    return (str(d.get("fail_type")), _one_line(d.get("reason")))


def recorded_dynamo_fallbacks(rec: Recording) -> list[Fallback]:
    """Return :func:`dynamo_fallbacks` of an open recording, reading only the events it uses."""
    return dynamo_fallbacks([e for name in DYNAMO_EVENTS for e in rec.events(name)])


# The events :func:`dynamo_fallbacks` reads.
DYNAMO_EVENTS = ("dynamo_recompile_limit", "dynamo_frame_failed", "dynamo_raised")


def _int(v) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def dynamo_reason(text, fail_type=None) -> str:
    """Return Dynamo's failure text as one line: its first line, then its explanation and first
    hint when it gives them (``Attempted to wrap RNN, GRU, or LSTM: Dynamo does not support RNN,
    GRU, or LSTM. Hint: Set torch._dynamo.config.allow_rnn=True ...``); the failure's type when
    there is no text."""
    lines = [" ".join(x.split()) for x in str(text or "").splitlines() if x.strip()]
    if not lines:
        return str(fail_type or "Dynamo could not trace it")
    parts = [lines[0]]
    explanation = next((x[len("Explanation:"):].strip() for x in lines[1:] if x.startswith("Explanation:")), "")
    hint = next((x[len("Hint:"):].strip() for x in lines[1:] if x.startswith("Hint:")), "")
    if explanation:
        parts[0] = parts[0].rstrip(".:") + ": " + explanation
    if hint:
        parts.append("Hint: " + hint)
    return " ".join(parts)


def symbol_note(executor: Optional[str], note: Optional[str]) -> Optional[str]:
    """Return the comment a text view prints next to a symbol: ``torch: not lowered: ...`` (the
    executor, then the recorded note), or None when there is no note."""
    if not note:
        return None
    return f"{executor}: {_one_line(note)}" if executor else _one_line(note)


def symbol_status(executor: Optional[str], note: Optional[str]) -> Optional[str]:
    """Return :data:`TORCH_OP` when a symbol run by ``executor`` with the compiler's ``note`` is a
    fallback (the torch executor runs it, the note says why), else None. The store selects the
    same top-level symbols in SQL (``recording.TORCH_NOTED``, for :func:`fallbacks`)."""
    return TORCH_OP if executor == "torch" and note else None


def note_function(events, graph: int, chain: str):
    """Return the ``PrintOptions.notes`` function every view prints traces with: next to each
    symbol, why it runs where it runs (``torch: not lowered: ...``, recorded notes), for a kernel
    that fell back at run time, ``ran in torch at run time: <error>``, and for another kernel what
    ran it (``ran on cpu via torch``); ``events``: the recording's ``kernel_fallback`` and
    ``kernel_path`` events. Recorded text is made terminal-safe."""
    from thundervis.safe_text import visible_line
    events = list(events)
    fell_back = {f.kernel: f.error for f in kernel_fallbacks(events) if f.graph == graph and f.chain == chain}
    runs = {name: run for (g, c, name), run in kernel_runs(events).items() if g == graph and c == chain}

    def note(b) -> Optional[str]:
        parts = []
        if b.sym in fell_back:
            parts.append(f"{FELL_BACK_TEXT}: {fell_back[b.sym]}")
        elif getattr(b, "fusion", False) and b.sym in runs:
            parts.append(ran_on_text(runs[b.sym]))
        text = symbol_note(b.executor, b.note)
        if text and not getattr(b, "fusion", False):  # a kernel's own note describes the kernel
            parts.append(text)
        return visible_line("  # ".join(parts)) if parts else None
    return note
