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
:func:`kernel_fallbacks` is the one reader of run-time fallback events; :func:`fallbacks` lists them
all through the reader API; :func:`chain_counts` counts eager chains.

What ran each kernel, where (:func:`kernel_runs`, :func:`ran_on_text`, :func:`kernel_label`,
:func:`kernel_tag`, :func:`built_targets`): a
Triton fusion's kernel is generated (and, with ``--target``, compiled) for a GPU, but what runs it
depends on the machine: a compiled Triton kernel on a GPU, Triton's interpreter, or, without CUDA
and with the default executors, the fast CPU path (the region's ATen ops through torch, or Inductor),
chosen by measuring (``kernel_path`` events; a ``kernel_fallback`` means torch ran it):
``fw_fusion_3 [triton · ran on cpu via torch]``, ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]``.
:func:`clock_label` names what a profiled time measured, so a CPU time never reads as a GPU time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Optional

from thundervis.recording import TORCH_NOTED, Recording, RecordingError, UnknownItem

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
    for c in chains_with_passes(g, chains):
        try:
            for s in rec.symbols(graph, c.kind, c.passes[0].index):
                if s.source is not None and s.source.line:
                    return _label(s.source.file, s.source.line)
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


@dataclass(frozen=True)
class KernelFallback:
    """A generated kernel that failed at run time and ran its region in torch instead (one
    ``kernel_fallback`` event): where, which kernel, which executor built it, why."""

    graph: Optional[int]
    chain: Optional[str]
    kernel: str
    executor: str
    uid: Optional[str]
    error: str
    sources: tuple  # ``file.py:LINE`` labels of the lines the kernel covers

    def as_json(self) -> dict:
        """Return the fallback as a JSON-ready dict."""
        return {"graph": self.graph, "chain": self.chain, "kernel": self.kernel, "executor": self.executor,
                "uid": self.uid, "error": self.error, "sources": list(self.sources)}


def kernel_fallbacks(events) -> list[KernelFallback]:
    """Return the run-time kernel fallbacks among ``events`` (``Recording.events()``): the one
    reader of ``kernel_fallback`` events."""
    out = []
    for e in events:
        if e.event != "kernel_fallback":
            continue
        d = e.data if isinstance(e.data, dict) else {}
        name = d.get("kernel")
        if not isinstance(name, str):
            continue
        srcs = [s for s in d.get("sources") or [] if isinstance(s, dict)]
        labels = tuple(filter(None, (_label(s.get("file"), s.get("line")) for s in srcs)))
        uid = d.get("uid") if isinstance(d.get("uid"), str) else None
        out.append(KernelFallback(e.graph, e.chain, name, str(d.get("executor") or "kernel"), uid,
                                  " ".join(str(d.get("error") or "").split()), labels))
    return out


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
                    src = _label(s.source.file, s.source.line) if s.source else None
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
                                _label(d.get("file"), d.get("line"))))
        elif e.event == "dynamo_frame_failed":
            where = _label(d.get("at_file"), _int(d.get("at_line"))) or _label(d.get("file"), _int(d.get("line")))
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


# ---------------------------------------------------------------- what ran each kernel, where

# The paths the compiler reports (compiler/executors/cpu_path.py VIA_*); anything else is shown as
# "unknown" (recordings are untrusted input).
PATHS = ("triton", "triton-interpreter", "torch", "inductor", "nvfuser")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class KernelRun:
    """How one kernel ran: ``device`` (``cpu``, ``cuda``), ``via`` (one of :data:`PATHS`),
    ``measured`` (False: only the plan made at build time is known, the kernel never ran),
    ``torch_us``/``inductor_us`` (the fast CPU path's first-call measurements, µs per call, None
    when not measured) and ``why`` (the reason of the choice, or of a run-time fallback)."""

    device: str
    via: str
    measured: bool = False
    torch_us: Optional[float] = None
    inductor_us: Optional[float] = None
    why: str = ""
    fell_back: bool = False  # its kernel failed at run time and torch ran the region instead

    def as_json(self) -> dict:
        """Return the ``ran_on`` object of ``ls --json``: device, via, measured, torch_us,
        inductor_us, why and ``text`` (what views print)."""
        return {"device": self.device, "via": self.via, "measured": self.measured, "torch_us": self.torch_us,
                "inductor_us": self.inductor_us, "why": self.why, "fell_back": self.fell_back,
                "text": ran_on_text(self)}


def _number(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v >= 0 else None


def _choice(v, allowed: tuple) -> str:
    return v if isinstance(v, str) and v in allowed else "unknown"


def run_from_event(data) -> Optional[KernelRun]:
    """Return the :class:`KernelRun` a ``kernel_path`` event's data says (None when it is not an
    object naming a kernel); every field is validated, unknown values read ``unknown``."""
    if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
        return None
    why = data.get("why")
    return KernelRun(_choice(data.get("device"), DEVICES), _choice(data.get("via"), PATHS),
                     data.get("planned") is not True, _number(data.get("torch_us")),
                     _number(data.get("inductor_us")), " ".join(why.split())[:300] if isinstance(why, str) else "")


def kernel_runs(events) -> dict:
    """Return {(graph, chain, kernel name): KernelRun} from a recording's ``events``
    (``Recording.events()``): the last ``kernel_path`` event of each kernel (a measured one beats a
    plan), and torch for a kernel that fell back at run time (:func:`kernel_fallbacks`). Kernels
    with neither (older recordings, other executors) are absent."""
    out: dict = {}
    for e in events:
        if e.event != "kernel_path":
            continue
        run = run_from_event(e.data)
        if run is not None:
            key = (e.graph, e.chain, e.data["kernel"])
            if run.measured or not (key in out and out[key].measured):
                out[key] = run
    for f in kernel_fallbacks(events):
        key = (f.graph, f.chain, f.kernel)
        device = out[key].device if key in out else "unknown"
        out[key] = KernelRun(device, "torch", True, why=f"fell back at run time: {f.error[:300]}", fell_back=True)
    return out


FELL_BACK_TEXT = "ran in torch at run time"  # a kernel that failed with no recorded path: torch ran its region


def path_text(run: Optional[KernelRun]) -> str:
    """Return where and how a kernel ran, for a table column: ``cpu via torch`` (``... (fell
    back)`` for a run-time fallback; "" for None)."""
    if run is None:
        return ""
    return _device_via(run) + (" (fell back)" if run.fell_back else "")


def ran_on_text(run: Optional[KernelRun]) -> str:
    """Return ``ran on cpu via torch`` (``runs on ...`` for a plan never run, ``... after its kernel
    failed`` for a run-time fallback; "" for None)."""
    if run is None:
        return ""
    verb = "ran on" if run.measured else "runs on"
    return f"{verb} {_device_via(run)}" + (" after its kernel failed" if run.fell_back else "")


def _device_via(run: KernelRun) -> str:
    """``cpu via torch``: the device and the path, the one wording :func:`path_text` (a table
    column) and :func:`ran_on_text` (a sentence) share."""
    return f"{run.device} via {run.via}"


def plan_note(note: Optional[str], run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> Optional[str]:
    """Return a kernel's generator note as views show it: as is, or, for a kernel also compiled
    for GPU ``targets``, headed by the device its note describes (``cpu plan: ...``): the recorded
    kernel is planned for the run's own device, each target's build is planned apart (its own
    grid and launches), so the note must not read as the target's plan."""
    if not note or not tuple(targets) or run is None or not run.device:
        return note
    return f"{run.device} plan: {note}"


def kernel_tag(executor: str, run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> str:
    """Return what a kernel's label says in brackets: ``triton sm_90 · ran on cpu via torch``
    (``targets``: the GPU archs it was compiled for; ``run``: how it ran, see :func:`kernel_runs`)."""
    return tag_text(executor, ran_on_text(run), targets)


def tag_text(executor: str, ran_on: str = "", targets: Iterable[str] = ()) -> str:
    """Return :func:`kernel_tag` from the ``ran_on`` text already made (:func:`ran_on_text`)."""
    head = " ".join([executor, *targets])
    return f"{head} · {ran_on}" if ran_on else head


def kernel_label(name: str, executor: str, run: Optional[KernelRun] = None, targets: Iterable[str] = ()) -> str:
    """Return how views name a kernel: ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]``
    (:func:`kernel_tag` in brackets)."""
    return f"{name} [{kernel_tag(executor, run, targets)}]"


def built_targets(rec, events=None) -> dict:
    """Return ``{(graph, chain, kernel name): (target, ...)}``: the GPU targets each kernel was
    compiled for ahead of time (``run --target``), successful builds only, in name order; empty for a
    run without targets (``events``: the recording's events when already read, to skip the builds
    table then)."""
    if events is not None and not any(e.event == "aot_started" for e in events):
        return {}
    if not callable(getattr(rec, "kernel_builds", None)):
        return {}
    out: dict = {}
    for b in rec.kernel_builds():
        if b.status == "ok":
            out.setdefault((b.graph, b.chain, b.kernel), set()).add(b.target)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def clock_label(device: Optional[str], clock: Optional[str] = None) -> str:
    """Return what a profiled time measured: ``GPU`` only for a device clock on CUDA, else ``CPU``
    (host clock, or a CPU run): nothing is called a GPU time that a GPU did not measure."""
    if isinstance(device, str) and device.startswith("cuda") and clock == "device":
        return "GPU"
    return "CPU"
