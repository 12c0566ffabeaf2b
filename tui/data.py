"""Everything the TUI reads from a recording, in one place.

The app and its widgets never touch the reader (or SQL) themselves: they call :class:`RecordingData`,
which turns the reader API of :mod:`thundervis.recording` into the small plain objects below, and
reuses the diff engine of :mod:`thundervis.diff` and the lineage of :mod:`thundervis.recording`
(no second copy of either). Every method may run in a worker thread; one lock serialises the
reader's single connection. Strings are returned as recorded: widgets make them visible with
:mod:`thundervis.safe_text` when they draw them.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional


class DataError(Exception):
    """A read failed (damaged recording, unknown item); the message is one sentence."""


# ------------------------------------------------------------------------------- plain objects

@dataclass(frozen=True)
class PassRow:
    """One pass of a chain: index, name, duration, whether it changed the trace, symbol count."""

    graph: int
    chain: str
    index: int
    name: str
    duration_ms: float
    changed: bool
    n_symbols: int


@dataclass(frozen=True)
class ChainRow:
    """A chain of a graph; ``eager`` holds the reason when it ran eagerly (compile failed)."""

    graph: int
    kind: str
    status: str
    passes: tuple[PassRow, ...]
    eager: Optional[str] = None


@dataclass(frozen=True)
class GraphRow:
    """A compiled graph: its chains, why it was compiled, compile time, whole-graph failure."""

    id: int
    reason: Optional[str]
    compile_ms: Optional[float]
    chains: tuple[ChainRow, ...]
    eager: Optional[str] = None


@dataclass(frozen=True)
class RunRow:
    """What ran and how it ended."""

    target: str
    argv: tuple[str, ...]
    status: str
    exit_code: Optional[int]
    traceback: Optional[str]
    device: Optional[str]
    torch: Optional[str]
    duration_s: Optional[float]


@dataclass(frozen=True)
class KernelRow:
    """A kernel with its timing (None when the run was not profiled) and fallback marks."""

    id: int
    graph: int
    chain: str
    name: str
    executor: str
    uid: Optional[str]
    n_ops: int
    ops: tuple[str, ...]
    members: tuple[str, ...]
    source_lines: tuple[str, ...]
    language: Optional[str]
    note: Optional[str]
    calls: Optional[int] = None
    median_us: Optional[float] = None
    share: Optional[float] = None
    gbps: Optional[float] = None
    fallback: Optional[str] = None  # why it fell back to torch at run time


@dataclass(frozen=True)
class Overview:
    """The whole recording at a glance: run, graphs, kernels, plus a revision to poll;
    ``collectives_between``: how many collectives ran between the compiled graphs."""

    path: str
    run: RunRow
    graphs: tuple[GraphRow, ...]
    kernels: tuple[KernelRow, ...]
    revision: object
    collectives_between: int = 0

    def chain(self, graph: int, kind: str) -> Optional[ChainRow]:
        """Return the chain ``kind`` of graph ``graph`` (None when absent)."""
        for g in self.graphs:
            if g.id == graph:
                for c in g.chains:
                    if c.kind == kind:
                        return c
        return None


@dataclass(frozen=True)
class TraceLine:
    """One printed line of a trace and the symbol it shows (``uid`` None for other lines);
    ``kind``: header, def, meta, source, stmt, sub, del, return."""

    text: str
    kind: str
    uid: Optional[str] = None


@dataclass(frozen=True)
class SymbolDetail:
    """What the details pane shows for one symbol."""

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
    lineage: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]  # (chain, link, ((pass, symbols), ...))
    ended_in: tuple[str, ...]  # "fw_fusion_3 [triton]", or the op and its executor
    twins: tuple[str, ...]  # symbols of other chains linked by seq_nr
    timing: Optional[str]


@dataclass
class SearchHit:
    """One search result: what kind, the text shown, and where it leads."""

    kind: str  # symbol | source | kernel
    text: str
    uid: Optional[str] = None
    kernel_id: Optional[int] = None
    line: Optional[int] = None


@dataclass
class RerunOutcome:
    """The results of one re-run (rows of executor comparison) or its error."""

    kernel: str
    rows: list = field(default_factory=list)  # (executor, status, median_us, max_abs, max_rel, detail)
    notes: list = field(default_factory=list)
    error: Optional[str] = None


# ------------------------------------------------------------------------------------- reader

def format_us(us: Optional[float]) -> str:
    """Return a time in microseconds as ``12.3 µs`` (``12.34 ms`` from 10 ms; ``-`` for None)."""
    if us is None:
        return "-"
    return f"{us / 1e3:.2f} ms" if us >= 1e4 else f"{us:.1f} µs"


def open_data(path: str) -> "RecordingData":
    """Open the recording at ``path`` (validated); raise :class:`DataError` with one sentence."""
    from thundervis.recording import RecordingError, open_recording
    try:
        return RecordingData(open_recording(path))
    except RecordingError as e:
        raise DataError(str(e)) from None


class RecordingData:
    """The TUI's view of one open recording (a ``thundervis.recording.Recording``, which is safe
    to use from several threads). Every method returns plain objects."""

    def __init__(self, rec):
        self._rec = rec
        self.path = rec.path
        # Memoised heavy results, bounded: traces, mapped lines, diff rows (see _cached).
        self._caches: dict[str, dict] = {"trace": {}, "lines": {}, "rows": {}}
        self._memo_lock = threading.Lock()
        self._inflight: dict[tuple, threading.Event] = {}

    def close(self) -> None:
        """Close the recording."""
        self._rec.close()

    @staticmethod
    def _call(fn, *args):
        from thundervis.recording import RecordingError, UnknownItem
        try:
            return fn(*args)
        except (RecordingError, UnknownItem) as e:
            raise DataError(str(e)) from None

    # -- overview -------------------------------------------------------------------------------

    def revision(self) -> object:
        """Return a cheap value that changes whenever the recording changes (live polling)."""
        return self._call(self._rec.revision)

    def overview(self) -> Overview:
        """Return the run, graphs (chains, passes, eager marks) and kernels."""
        from thundervis.recording.collectives import count_between
        ov = self._call(self._rec.overview)
        events = self._call(self._rec.events)
        fallbacks = _runtime_fallbacks(events)
        run = ov.run
        run_row = RunRow(run.target, tuple(str(a) for a in (run.argv or [])[1:]), run.status, run.exit_code,
                         run.traceback, run.device, run.torch, run.duration_s)
        out, kernels = [], []
        for g in ov.graphs:
            whole = next((f.error for f in g.failures if f.chain is None), None)
            chains = []
            for c in g.chains:
                eager = c.error if c.status == "failed" else None
                if eager is None:
                    eager = next((f.error for f in g.failures if f.chain == c.kind), None)
                passes = tuple(PassRow(p.graph, p.chain, p.index, p.name, p.duration_ms, p.changed, p.n_symbols)
                               for p in c.passes)
                chains.append(ChainRow(g.id, c.kind, c.status, passes, eager))
            out.append(GraphRow(g.id, g.reason, g.compile_s * 1e3 if g.compile_s is not None else None,
                                tuple(chains), whole))
            for k in g.kernels:
                t = k.timing
                kernels.append(KernelRow(
                    k.id, k.graph, k.chain, k.name, k.executor, k.uid, k.n_ops,
                    tuple(str(o) for o in k.ops), tuple(str(m) for m in k.members), tuple(k.sources),
                    k.language, k.note, t.calls if t else None, t.median_us if t else None,
                    t.share if t else None, t.gbps if t else None,
                    fallbacks.get((k.graph, k.chain, k.name))))
        return Overview(self.path, run_row, tuple(out), tuple(kernels), ov.revision,
                        count_between((e.event, e.data) for e in events))

    def communication(self):
        """Return the run's communication (a ``tui.comm_data.CommunicationInfo``: the ops traced into
        the graphs, the collectives run between them per place; reads traces: call it from a worker)."""
        from .comm_data import read_communication
        return self._call(read_communication, self._rec)

    def kernel_code(self, kernel_id: int) -> tuple[Optional[str], Optional[str]]:
        """Return (language, generated code) of one kernel (loaded on request)."""
        src = self._call(self._rec.kernel_source, kernel_id)
        return src.language, src.code

    def source_files(self) -> list[str]:
        """Return the user files the recording holds (the Source screen's list)."""
        return self._call(self._rec.source_files)

    def default_source_file(self) -> Optional[str]:
        """Return the file the Source screen opens on (the run's script when recorded)."""
        from thundervis.present.source_view import default_file
        return self._call(default_file, self._rec)

    def source_file(self, file: str):
        """Return ``file`` annotated line by line (``thundervis.present.source_view.SourceFile``)."""
        from thundervis.present.source_view import source_file
        return self._call(source_file, self._rec, file)

    # -- traces ---------------------------------------------------------------------------------

    def pass_text(self, graph: int, chain: str, index: int) -> str:
        """Return the printed trace of one pass (fast: stored text)."""
        from thundervis.recording import PassRef
        return self._call(self._rec.pass_text, PassRef(graph, chain, index))

    def _cached(self, cache: str, key: tuple, make: Callable[[], object], size: int = 8):
        """Return ``make()`` memoised under ``key`` in ``cache`` (the oldest entries dropped past
        ``size``); a second thread asking for a key being made waits for the first one."""
        store = self._caches[cache]
        full = (cache,) + key
        with self._memo_lock:
            if key in store:
                return store[key]
            wait = self._inflight.get(full)
            if wait is None:
                self._inflight[full] = threading.Event()
        if wait is not None:
            wait.wait()
            with self._memo_lock:
                if key in store:
                    return store[key]
            return make()  # the first maker failed: try (and fail) here too
        try:
            value = make()
            with self._memo_lock:
                while len(store) >= size:
                    store.pop(next(iter(store)))
                store[key] = value
            return value
        finally:
            with self._memo_lock:
                self._inflight.pop(full).set()

    def cached(self, cache: str, key: tuple) -> bool:
        """Return whether ``key`` is already in ``cache`` (``trace``, ``lines`` or ``rows``)."""
        with self._memo_lock:
            return key in self._caches[cache]

    def forget(self) -> None:
        """Drop every memoised trace, line map and diff (benchmarks measure cold steps)."""
        with self._memo_lock:
            for store in self._caches.values():
                store.clear()

    def trace(self, graph: int, chain: str, index: int):
        """Return the (validated) trace of one pass; the last few are kept."""
        from thundervis.recording import PassRef
        return self._cached("trace", (graph, chain, index),
                            lambda: self._call(self._rec.pass_trace, PassRef(graph, chain, index)), size=6)

    def trace_lines(self, graph: int, chain: str, index: int) -> list[TraceLine]:
        """Return the printed lines of one pass, each with the uid of the symbol it shows."""
        def make():
            text = self.pass_text(graph, chain, index)
            return map_lines(text.splitlines(), self.trace(graph, chain, index))
        return self._cached("lines", (graph, chain, index), make)

    def diff(self, graph: int, chain: str, before: int, after: int):
        """Return the :class:`thundervis.diff.TraceDiff` from pass ``before`` to pass ``after``."""
        from thundervis.diff import diff_traces
        a = self.trace(graph, chain, before)
        b = self.trace(graph, chain, after)
        d = diff_traces(a, b)
        names = {p.index: p.name for p in self._chain_passes(graph, chain)}
        d.before = f"{before} {names.get(before, '?')}"
        d.after = f"{after} {names.get(after, '?')}"
        return d

    def diff_rows(self, graph: int, chain: str, before: int, after: int, side: bool,
                  context: Optional[int]) -> tuple[list, dict]:
        """Return the display rows of a pass diff (``thundervis.diff.render`` unified or
        side-by-side rows, folded to ``context``) and its per-status counts."""
        from thundervis.diff.render import side_rows, unified_rows

        def make():
            d = self.diff(graph, chain, before, after)
            rows = side_rows(d, context) if side else unified_rows(d, context)
            return rows, d.counts()
        return self._cached("rows", (graph, chain, before, after, side, context), make)

    def _chain_passes(self, graph: int, chain: str):
        g = self._call(self._rec.graph, graph)
        return self._call(g.chain, chain).passes

    # -- details --------------------------------------------------------------------------------

    def lineage(self, graph: int, uid: str) -> tuple:
        """Return the lineage of ``uid`` as ``((chain, link, ((passes, symbols), ...)), ...)``,
        consecutive passes that kept the same symbols merged."""
        lin = self._call(self._rec.lineage_of_uid, graph, uid)
        return tuple((cl.chain, cl.link, _runs(cl.steps)) for cl in lin.chains)

    def symbol_detail(self, graph: int, chain: str, index: int, uid: str,
                      with_lineage: bool = True) -> SymbolDetail:
        """Return what is known about symbol ``uid`` as of pass ``index``: source with context,
        what it came from and became, the kernel it ended in, its twins, why it was not lowered or
        fused, its timing, and (``with_lineage``) its lineage through every chain's passes."""
        from dataclasses import replace

        from thundervis.recording import PassRef
        d = self._call(self._rec.symbol, PassRef(graph, chain, index), uid)
        b = d.symbol
        steps = ()
        ended = []
        if d.kernel is not None:
            ended.append(f"{d.kernel.name} [{d.kernel.executor}]")
        for e in d.ends:
            if d.kernel is None or e.sym != d.kernel.name:
                ended.append(f"{e.sym} [{e.executor or 'no executor'}]")
        twins = tuple(f"{t.chain}: {_sym_label(t)} ({t.uid})" for t in d.twins[:6])
        src = d.source
        snippet = ()
        if d.snippet is not None:
            snippet = tuple((d.snippet.first_line + i, line) for i, line in enumerate(d.snippet.lines))
        timing = None
        t = d.timing
        if t is not None:
            timing = f"{format_us(t.median_us)} median over {t.calls} calls · {t.share * 100:.1f}% of step"
            if t.gbps:
                timing += f" · {t.gbps:.3g} GB/s"
        detail = SymbolDetail(uid, b.sym, chain, b.executor, b.note, b.aten, b.seq_nr,
                            src.file if src else None, src.line if src else None, src.code if src else None,
                            d.module, snippet, bool(d.snippet and d.snippet.recorded),
                            tuple(f"{_sym_label(s)} ({s.uid})" for s in d.came_from[:6]),
                            tuple(f"{_sym_label(s)} ({s.uid})" for s in d.became[:6]),
                            d.fallback, steps, tuple(dict.fromkeys(ended)), twins, timing)
        return replace(detail, lineage=self.lineage(graph, uid)) if with_lineage else detail

    # -- kernels --------------------------------------------------------------------------------

    def rerun_results(self, kernel_id: int) -> list:
        """Return the stored re-run results of one kernel as comparison rows."""
        return [(r.executor, r.status, r.median_us, r.max_abs_error, r.max_rel_error, r.detail)
                for r in self._call(self._rec.rerun_results, kernel_id)]

    def rerun(self, kernel: KernelRow, executors: tuple[str, ...] = ("triton", "nvfuser", "inductor", "torch"),
              progress: Optional[Callable[[int, int, str], None]] = None) -> RerunOutcome:
        """Re-run ``kernel`` with each executor in turn (the computation is
        :func:`thundervis.rerun.rerun_kernel`, which imports torch: call this from a worker),
        calling ``progress(done, total, executor)``; errors come back in the outcome."""
        out = RerunOutcome(kernel.name)
        try:
            from thundervis.rerun import rerun_kernel
        except Exception as e:  # torch missing or broken: say so in the UI
            out.error = f"re-run is not available here ({type(e).__name__}: {e})"
            return out
        for i, name in enumerate(executors):
            if progress is not None:
                progress(i, len(executors), name)
            try:
                report = rerun_kernel(self.path, kernel.name, executor=[name], graph=kernel.graph,
                                      chain=kernel.chain, iters=5)
            except Exception as e:
                out.rows.append((name, "failed", None, None, None, f"{type(e).__name__}: {e}"))
                continue
            out.notes.extend(n for n in report.notes if n not in out.notes)
            for r in report.results:
                out.rows.append((r.executor, r.status, r.median_us, r.max_abs_error, r.max_rel_error, r.detail))
        if progress is not None:
            progress(len(executors), len(executors), "")
        if out.rows and all(r[1] != "ok" for r in out.rows):
            out.error = f"no executor could re-run {kernel.name}"
        return out

    def write_repro(self, kernel: KernelRow, folder: str = ".") -> str:
        """Write the repro script of ``kernel`` into ``folder`` (a new file name) and return its
        path; raise :class:`DataError` with one sentence when it cannot be written."""
        base = os.path.join(folder, f"repro_g{kernel.graph}_{kernel.chain}_{_safe_name(kernel.name)}")
        path, n = base + ".py", 1
        while os.path.exists(path):
            n += 1
            path = f"{base}_{n}.py"
        try:
            from thundervis.repro import write_repro
            return write_repro(self.path, kernel.name, path, graph=kernel.graph, chain=kernel.chain)
        except Exception as e:
            raise DataError(f"could not write the repro script for {kernel.name} ({e})") from None

    # -- search ---------------------------------------------------------------------------------

    def search(self, query: str, graph: int, chain: str, index: int, lines: list[TraceLine],
               kernels: tuple[KernelRow, ...], limit: int = 200) -> list[SearchHit]:
        """Return hits for ``query`` (case-insensitive) in the shown pass's symbols and source
        lines and in every kernel name."""
        q = query.lower().strip()
        if not q:
            return []
        hits: list[SearchHit] = []
        for n, ln in enumerate(lines):
            if q in ln.text.lower():
                kind = "source" if ln.kind == "source" else "symbol"
                hits.append(SearchHit(kind, ln.text.strip(), ln.uid, line=n))
                if len(hits) >= limit:
                    break
        for k in kernels:
            if q in k.name.lower():
                hits.append(SearchHit("kernel", f"{k.name}  [{k.executor}] graph {k.graph} {k.chain}",
                                      kernel_id=k.id))
        return hits


# ------------------------------------------------------------------------------------- helpers

def _runtime_fallbacks(events) -> dict:
    """Map (graph, chain, kernel name) -> reason for kernels that fell back at run time, from the
    recording's events."""
    out = {}
    for e in events:
        if "fallback" not in e.event or not isinstance(e.data, dict):
            continue
        name = e.data.get("kernel") or e.data.get("name")
        reason = e.data.get("reason") or e.data.get("error") or e.event
        if name:
            out[(e.graph, e.chain, str(name))] = str(reason)
    return out


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:80] or "kernel"


def _runs(steps) -> tuple[tuple[str, str], ...]:
    """Return (pass names, symbols) for the lineage steps of one chain, consecutive passes that
    hold the same symbols merged into one ``first … last`` entry."""
    out: list[list[str]] = []
    for st in steps:
        if not st.symbols:
            continue
        syms = ", ".join(_sym_label(s) for s in st.symbols[:6]) + (
            f" (+{len(st.symbols) - 6})" if len(st.symbols) > 6 else "")
        if out and out[-1][2] == syms:
            out[-1][1] = st.pass_name
        else:
            out.append([st.pass_name, st.pass_name, syms])
    return tuple((a if a == b else f"{a}…{b}", syms) for a, b, syms in out)


def _sym_label(s) -> str:
    return s.sym.removeprefix("prims.")


def map_lines(printed: list[str], trace) -> list[TraceLine]:
    """Return the printed lines of ``trace`` (``print_trace`` output, split) each with the uid of
    the symbol it shows. Walks the symbols in print order: a source comment when the source
    changes, the statement, then one line per subsymbol. A line that does not match what the
    walk expects stops the mapping (the rest is shown without symbols)."""
    out: list[TraceLine] = []
    n = len(printed)
    i = 0
    if i < n and printed[i].startswith("# graph "):
        out.append(TraceLine(printed[i], "header"))
        i += 1
    if i < n and printed[i].startswith("def "):
        # the signature, wrapped over several lines when it is long, ends with "):"
        while i < n:
            out.append(TraceLine(printed[i], "def"))
            i += 1
            if out[-1].text.rstrip().endswith(":"):
                break
    while i < n and _INPUTS_COMMENT.match(printed[i]):  # the inputs' metadata, wrapped too
        out.append(TraceLine(printed[i], "meta"))
        i += 1
    last_src = None
    for b in (trace.symbols if trace is not None else ()):
        if i >= n:
            break
        if b.sym == "del":
            out.append(TraceLine(printed[i], "del"))
            i += 1
            continue
        src = b.source
        if src is not None:
            key = (src.file, src.line, src.module)
            if key != last_src:
                last_src = key
                if printed[i].startswith("  #") and b.sym not in printed[i]:
                    out.append(TraceLine(printed[i], "source", b.uid))
                    i += 1
        if i >= n or b.sym not in printed[i]:
            break
        out.append(TraceLine(printed[i], "stmt", b.uid))
        i += 1
        for s in b.subsymbols:
            if i >= n:
                break
            out.append(TraceLine(printed[i], "del" if s.sym == "del" else "sub",
                                 None if s.sym == "del" else s.uid))
            i += 1
    for line in printed[i:]:
        out.append(TraceLine(line, _guess_kind(line)))
    return out


# "  # idx: cpu i64[8, 32] ..." (a source comment reads "  # train.py:12  code")
_INPUTS_COMMENT = re.compile(r"^  # [\w.]+: \S+ \w+\[")


def _guess_kind(line: str) -> str:
    """Return the kind of a printed line from its shape alone (before the trace is loaded)."""
    body = line.lstrip()
    lead = len(line) - len(body)
    if body.startswith("return"):
        return "return"
    if body.startswith("del "):
        return "del"
    if body.startswith("#"):
        if lead >= 4:
            return "sub"
        if _INPUTS_COMMENT.match(line):
            return "meta"
        head = body[2:].split("  ", 1)[0]
        return "source" if ":" in head and head.rsplit(":", 1)[-1].isdigit() else "meta"
    return "stmt"
