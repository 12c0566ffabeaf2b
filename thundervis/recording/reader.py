"""Reading a recording: the one door through which views, commands and tests read one.

:func:`open_recording` opens a recording's store (:mod:`.store`: a plain file, a packed rank file
of a group, or a ``.tvrank`` laid over its variant) and returns a :class:`Recording`, which holds
that store and answers every query with the frozen values of :mod:`thundervis.recording.model`
(the view model). Anything unreadable is one sentence in a :class:`RecordingError`: a file that
does not exist or is not a regular file, is not a thundervis recording, is truncated, corrupted,
was written with a newer schema, holds views or triggers, or holds a value of the wrong type or
range where the reader reads it (every column is checked, :mod:`.typed`).

Reading never writes (see :mod:`.file_store`). Each thread gets its own connection, so UI worker
threads may call any method; :meth:`Recording.revision` changes when another process commits (a
live run), which is what a viewer polls. Trace JSON is loaded by the compiler's validating loader;
nothing is unpickled or executed. Symbol rows are :mod:`.symbol_rows`' (a :class:`SymbolIndex` the
recording holds), lineage and symbol details :mod:`.lineage`'s. Group folders (:mod:`.group`) sit
on top of this module and are never imported by it.

A module that reads a table of its own goes through ``rec.store.rows(sql, params)`` (see
:mod:`.store` for how).
"""
from __future__ import annotations

import difflib
import os
import threading
from typing import Optional, Union

from .errors import RecordingError
from .model import (CHAIN_ORDER, Chain, Event, Failure, Graph, KernelInfo, KernelSource,  # noqa: F401
                    KernelTiming, Lineage, Overview, PassInfo, PassRef, RerunResult, Revision, Run,
                    SourceSnippet, Symbol, SymbolDetail, Timings, UnknownItem, chain_position)
from .liveness import last_recorded, run_status
from . import pass_texts, source_texts
from .event_rows import MAX_EVENTS, EventRows
from . import kernel_folds
from .pass_texts import kernel_texts
from .pass_refs import PassLike, _pass_key  # noqa: F401
from .store import Store, open_store
from .symbol_rows import SymbolIndex, SymbolRule
from .typed import load_json, row_checker

SNIPPET_CONTEXT = 3  # lines shown before and after a symbol's source line


def open_recording(path: str, *, check: bool = True) -> "Recording":
    """Open the recording at ``path`` read-only and return a :class:`Recording`.

    With ``check`` the whole file is verified with SQLite's ``quick_check``. Raises
    :class:`RecordingError` (one sentence) for anything that is not a readable recording."""
    return Recording(open_store(os.path.abspath(path), check))


def _chain_order(kind: str) -> tuple:
    return (chain_position(kind), kind)


_KERNEL_COLUMNS = ("id, graph_id, chain, name, executor, uid, pass_name, language, members, ops, inputs,"
                   " outputs, source_lines, note")
_CHECK_KERNELS = row_checker("kernels", _KERNEL_COLUMNS.split(", "), (
    "int", "int", "text", "text", "text", "text?", "text?", "text?", "text", "text", "text", "text", "text", "text?"))
_CHECK_PASSES = row_checker("passes", ("graph_id", "chain", "idx", "name", "duration_ms", "changed", "n_symbols"),
                            ("int", "text", "nat", "text", "pos", "int", "nat"))
_CHECK_CHAINS = row_checker("chains", ("graph_id", "kind", "status", "error"), ("int", "text", "text", "text?"))
_CHECK_FAILURES = row_checker("failures", ("graph_id", "chain", "error", "traceback"),
                              ("int", "text?", "text", "text?"))
_CHECK_GRAPHS = row_checker("graphs", ("id", "compile_id", "reason", "recompile_reason", "graph_break_reason",
                                       "n_inputs", "n_nodes", "compile_s"),
                            ("int", "text?", "text?", "text?", "text?", "nat?", "nat?", "pos?"))
_CHECK_RUN = row_checker("run", ("script", "module", "argv", "cwd", "python", "torch", "triton", "thundervis",
                                 "device", "executors", "started_at", "ended_at", "status", "exit_code",
                                 "traceback", "pid", "host", "process_start"),
                         ("text?", "text?", "text", "text", "text?", "text?", "text?", "text?", "text?", "text?",
                          "num", "num?", "text", "int?", "text?", "int?", "text?", "text?"))
_RUN_STATUSES = ("running", "ok", "failed", "interrupted")
_CHECK_KERNEL_SOURCE = row_checker("kernels", ("id", "name", "language"), ("int", "text", "text?"))


class Recording:
    """A recording open for reading; create it with :func:`open_recording`. Safe to use from
    several threads (one SQLite connection per thread); every method returns view-model values.
    ``store`` is where it reads (:class:`~.store.Store`; ``store.rows(sql, params)`` is the one
    query entry point for modules that read tables of their own)."""

    def __init__(self, store: Store):
        self.store = store
        self.path = store.path
        self.schema_version = store.schema_version
        self.immutable = store.immutable
        self._lock = threading.Lock()  # guards the caches
        self._graphs_cache: Optional[tuple[Revision, list[Graph]]] = None
        self._symbol_index = SymbolIndex(self)
        self._events = EventRows(self)
        self._texts: dict = {}  # pass texts built from deltas, for the next pass's delta (pass_deltas)
        self._n_symbol_rows: Optional[int] = None  # sizes the JSON budget (pass_texts.json_budget)

    # -- the store --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file (every thread's connection)."""
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def snapshot(self):
        """Run the ``with`` body's reads on one consistent snapshot of the file (a live run's later
        commits are not seen halfway through); nests."""
        return self.store.snapshot()

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        # Kept for modules written before the store: new code calls self.store.rows.
        return self.store.rows(sql, params)

    def _json(self, text, default=None, what: str = "a stored JSON value"):
        """Parse a stored JSON value (depth-limited); with a list or dict ``default`` it must be of
        that type."""
        expect = type(default) if isinstance(default, (list, dict)) else None
        return load_json(text, what, self.path, expect, default)

    def revision(self) -> Revision:
        """Return the file's :class:`Revision`: it changes when another process commits to the
        file (a live run writing, a rerun storing results) or the run's status changes. Cheap:
        poll it and reload what is shown when it differs."""
        return Revision(self.store.data_version(), self.run().status)

    # -- run and graphs -----------------------------------------------------------------------

    def run(self) -> Run:
        """Return the run row."""
        extra = "host, process_start" if self.schema_version >= 2 else "NULL, NULL"
        rows = self.store.rows("SELECT script, module, argv, cwd, python, torch, triton, thundervis, device,"
                               f" executors, started_at, ended_at, status, exit_code, traceback, pid, {extra} FROM run")
        if len(rows) != 1:
            raise RecordingError(f"{self.path} is corrupted (it holds {len(rows)} run rows, not one).")
        r = _CHECK_RUN(rows, self.path)[0]
        if r[12] not in _RUN_STATUSES:
            raise RecordingError(f"{self.path} is corrupted (run.status is not one of {', '.join(_RUN_STATUSES)}).")
        status = run_status(r[12], r[15], r[16], r[17])
        last = last_recorded(self.store.connection()) if status == "killed" else None
        argv = [str(a) for a in self._json(r[2], [], "run.argv")]
        executors = self._json(r[9], None, "run.executors")
        if executors is not None and not isinstance(executors, list):
            raise RecordingError(f"{self.path} is corrupted (run.executors is not a JSON list).")
        return Run(r[0], r[1], argv, r[3], r[4], r[5], r[6], r[7], r[8],
                   executors, r[10], r[11], status, r[13], r[14], r[15], r[16], last)

    def overview(self) -> Overview:
        """Return the :class:`Overview` (what ``ls`` shows): run, graphs with chains, passes,
        failures, kernels (no code) and timings, and the revision it was read at."""
        revision = self.revision()
        with self.snapshot():
            return Overview(self.path, self.schema_version, self.run(), tuple(self._graphs(revision)), revision)

    def _graphs(self, revision: Optional[Revision] = None) -> list[Graph]:
        revision = revision or self.revision()
        with self._lock:
            cached = self._graphs_cache
        if cached is not None and cached[0] == revision:
            return cached[1]
        with self.snapshot():
            timings = self.timings()
            passes: dict[tuple, list[PassInfo]] = {}
            for g, c, i, n, ms, ch, ns in _CHECK_PASSES(self.store.rows(
                    "SELECT graph_id, chain, idx, name, duration_ms, changed, n_symbols FROM passes"
                    " ORDER BY graph_id, chain, idx"), self.path):
                passes.setdefault((g, c), []).append(PassInfo(g, c, i, n, ms, bool(ch), ns))
            chains: dict[int, list[Chain]] = {}
            for g, kind, status, error in _CHECK_CHAINS(self.store.rows(
                    "SELECT graph_id, kind, status, error FROM chains"), self.path):
                chains.setdefault(g, []).append(Chain(g, kind, status, error, tuple(passes.get((g, kind), ()))))
            failures: dict[int, list[Failure]] = {}
            for f in self.failures():
                failures.setdefault(f.graph, []).append(f)
            kernels: dict[int, list[KernelInfo]] = {}
            for k in self._kernels("", (), timings):
                kernels.setdefault(k.graph, []).append(k)
            out = []
            for row in _CHECK_GRAPHS(self.store.rows(
                    "SELECT id, compile_id, reason, recompile_reason, graph_break_reason,"
                    " n_inputs, n_nodes, compile_s FROM graphs ORDER BY id"), self.path):
                gid = row[0]
                cs = sorted(chains.get(gid, []), key=lambda c: _chain_order(c.kind))
                out.append(Graph(*row, chains=tuple(cs), failures=tuple(failures.get(gid, ())),
                                 kernels=tuple(kernels.get(gid, ())), timings=timings.for_graph(gid)))
        with self._lock:
            self._graphs_cache = (revision, out)
        return out

    def graphs(self) -> list[Graph]:
        """Return every graph with its chains, passes, failures, kernels (no code) and timings."""
        return list(self._graphs())

    def graph(self, graph_id: int) -> Graph:
        """Return graph ``graph_id``; raise :class:`UnknownItem` naming the recorded graphs."""
        graphs = self._graphs()
        for g in graphs:
            if g.id == graph_id:
                return g
        ids = ", ".join(str(g.id) for g in graphs) or "none recorded"
        raise UnknownItem(f"no graph {graph_id} in this recording (graphs: {ids})")

    def failures(self) -> list[Failure]:
        """Return every recorded failure, in order."""
        return [Failure(*r) for r in _CHECK_FAILURES(self.store.rows(
            "SELECT graph_id, chain, error, traceback FROM failures ORDER BY id"), self.path)]

    def events(self, event: Optional[str] = None, limit: int = MAX_EVENTS) -> list[Event]:
        """Return the recorded events (all, or those named ``event``), in order: at most ``limit``,
        from the first :data:`~.event_rows.MAX_EVENTS` rows of the file (see :mod:`.event_rows`)."""
        return self._events.events(event, limit)

    # -- kernels --------------------------------------------------------------------------------

    def _kernels(self, where: str, params: tuple, timings: Optional[Timings] = None) -> list[KernelInfo]:
        timings = self.timings() if timings is None else timings
        by_id = {k.kernel_id: k for k in timings.kernels if k.kernel_id is not None}
        by_name = {(k.graph, k.chain, k.name): k for k in timings.kernels if k.kind == "fusion"}
        out = []
        for r in _CHECK_KERNELS(self.store.rows(f"SELECT {_KERNEL_COLUMNS} FROM kernels {where} ORDER BY id",
                                                params), self.path):
            timing = by_id.get(r[0]) or by_name.get((r[1], r[2], r[3]))
            out.append(KernelInfo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                                  tuple(self._json(r[8], [], "kernels.members")),
                                  tuple(self._json(r[9], [], "kernels.ops")),
                                  tuple(self._json(r[10], [], "kernels.inputs")),
                                  tuple(self._json(r[11], [], "kernels.outputs")),
                                  tuple(self._json(r[12], [], "kernels.source_lines")), r[13], timing))
        return out

    def kernels(self, graph: Optional[int] = None, chain: Optional[str] = None) -> list[KernelInfo]:
        """Return the recorded kernels (all, of one graph, or of one chain), in build order, with
        their timings and without their code (:meth:`kernel_source`)."""
        clauses, params = [], []
        if graph is not None:
            clauses.append("graph_id=?")
            params.append(graph)
        if chain is not None:
            clauses.append("chain=?")
            params.append(chain)
        return self._kernels(("WHERE " + " AND ".join(clauses)) if clauses else "", tuple(params))

    def kernel(self, kernel_id: int) -> KernelInfo:
        """Return the kernel with id ``kernel_id``; :class:`UnknownItem` when there is none."""
        found = self._kernels("WHERE id=?", (kernel_id,))
        if not found:
            raise UnknownItem(f"no kernel with id {kernel_id} in this recording")
        return found[0]

    def find_kernel(self, name: str, graph: Optional[int] = None, chain: Optional[str] = None) -> KernelInfo:
        """Return the kernel called ``name``: names are unique in a recording (forward and backward
        kernels are named apart, ``fw_fusion_3`` / ``bw_fusion_3``); older recordings restart
        ``triton_fusion_N`` per chain, so the first match in graph then chain order, optionally
        within ``graph``/``chain``. :class:`UnknownItem` names the closest names otherwise."""
        kernels = self.kernels()
        hits = [k for k in kernels if k.name == name and (graph is None or k.graph == graph)
                and (chain is None or k.chain == chain)]
        if hits:
            return hits[0]
        names = sorted({k.name for k in kernels})
        if not names:
            raise UnknownItem("this recording holds no kernels (was it recorded with a fusion executor?)")
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.4) or names[:3]
        where = "" if graph is None and chain is None else " there"
        raise UnknownItem(f"no kernel named {name!r}{where} in this recording; closest: {', '.join(close)}")

    def kernel_source(self, kernel: Union[KernelInfo, int]) -> KernelSource:
        """Return the generated code and the region IR (JSON text) of one kernel."""
        kid = kernel.id if isinstance(kernel, KernelInfo) else int(kernel)
        with self.store.snapshot():
            rows = self.store.rows(f"SELECT {kernel_folds.KERNEL_TEXT_COLUMNS} FROM kernels WHERE id=?", (kid,))
            if not rows:
                raise UnknownItem(f"no kernel with id {kid} in this recording")
            _CHECK_KERNEL_SOURCE([(rows[0][0], rows[0][3], rows[0][4])], self.path)
            # a repeated layer's kernel reads its first instance's texts (recording/kernel_folds.py)
            kid, _, _, name, language, code, trace_json, n_members = kernel_folds.resolve(self.store, rows[0])
        return kernel_texts(self, kid, name, language, code, trace_json, n_members)

    def kernel_folds(self) -> Optional[dict]:
        """Return ``{folded kernel id: id of its first instance}``: a repeated layer's kernels
        recorded once (None: an older recording, made before folds were recorded);
        :meth:`kernel_source` resolves them."""
        return kernel_folds.fold_map(self.store)

    # -- passes ---------------------------------------------------------------------------------

    def _pass_row(self, ref: PassRef, want: str = "both") -> tuple:
        """Return (name, symbols_from, trace_json, printed, meta) of one pass as texts (see
        :func:`.pass_texts.pass_row`: shared passes followed, deltas applied, JSON budgeted)."""
        return pass_texts.pass_row(self, ref, want)

    def pass_info(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> PassInfo:
        """Return the :class:`PassInfo` of one pass (a PassRef, or graph, chain, index)."""
        ref = _pass_key(ref, chain, index)
        return self.graph(ref.graph).chain(ref.chain).find_pass(ref.index)

    def pass_text(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> str:
        """Return the printed trace of one pass (a PassRef, or graph, chain, index)."""
        return self._pass_row(_pass_key(ref, chain, index), "printed")[3]

    def pass_json(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> str:
        """Return the trace JSON text of one pass as stored (see compiler/serialize.py)."""
        return self._pass_row(_pass_key(ref, chain, index), "json")[2]

    def pass_trace(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None):
        """Return the trace (``thundervis.compiler.ir.Trace``) of one pass, loaded from its JSON by
        the validating loader."""
        from thundervis.compiler.serialize import TraceFormatError, trace_from_json
        ref = _pass_key(ref, chain, index)
        name, held, trace_json, _, meta = self._pass_row(ref, "json")
        def kernel_names():  # older recordings: their kernels say which symbols are fusions
            return [r[0] for r in self.store.rows("SELECT name FROM kernels WHERE graph_id=? AND chain=?",
                                             (ref.graph, ref.chain))]
        try:
            trace = trace_from_json(trace_json, kernel_names)
        except (TraceFormatError, ValueError, TypeError, RecursionError) as e:
            raise RecordingError(f"{self.path} holds a damaged trace for graph {ref.graph} {ref.chain} "
                                 f"pass {ref.index} ({e}).") from None
        if held != ref.index:
            trace = trace.replace(pass_name=name, meta=self._json(meta, {}))
        return trace

    # -- the user's source ----------------------------------------------------------------------

    def source_files(self) -> list[str]:
        """Return the user source files whose text the recording holds."""
        return source_texts.source_files(self.store)

    def source_text(self, file: str) -> Optional[str]:
        """Return the text of user source file ``file`` as it was when the run compiled it (None
        when the recording does not hold it); :class:`~.budgets.TooLarge` past the line budget."""
        return source_texts.source_text(self.store, file)

    def source_lines(self, file: str, limit: int = source_texts.MIN_SOURCE_LINES) -> Optional[list[str]]:
        """Return the lines of user source ``file`` (None when not recorded), streamed under the
        budget ``limit`` (:func:`.source_texts.line_budget`); :class:`~.budgets.TooLarge` past it."""
        return source_texts.source_lines(self.store, file, limit)

    def source_snippet(self, source, context: int = SNIPPET_CONTEXT) -> Optional[SourceSnippet]:
        """Return the lines around ``source`` (a SourceInfo: file, line, code) from the recorded
        file text, ``context`` lines either side; without the file text, the recorded code line."""
        return source_texts.source_snippet(self.store, source, context)

    # -- timings and re-runs --------------------------------------------------------------------

    def timings(self) -> Timings:
        """Return the per-kernel and per-chain timings (empty when the run was not profiled)."""
        from .results import read_timings
        return read_timings(self.store)

    def kernel_timing(self, kernel: KernelInfo) -> Optional[KernelTiming]:
        """Return the timing of one kernel (None when not profiled)."""
        return self.kernel(kernel.id).timing

    def kernel_numerics(self) -> list:
        """Return the ``run --check-numerics`` results, one ``KernelNumerics`` per kernel (empty:
        the run was not checked)."""
        from .numerics import read_kernel_numerics
        return read_kernel_numerics(self.store)

    def kernel_labels(self) -> list:
        """Return every kernel's ``KernelLabel`` (id, graph, chain, name, executor, sources): what
        a numerics table shows, read without the kernels' tensors and timings."""
        from .numerics import read_kernel_labels
        return read_kernel_labels(self.store)

    def eager_comparisons(self) -> list:
        """Return the ``run --compare-eager`` results, one ``EagerComparison`` per chain (empty:
        the run did not compare)."""
        from .numerics import read_eager_comparisons
        return read_eager_comparisons(self.store)

    def rerun_results(self, kernel_id: Optional[int] = None) -> list[RerunResult]:
        """Return the stored re-run results (of one kernel, or all), oldest first."""
        from .results import read_rerun_results
        return read_rerun_results(self.store, kernel_id)

    # -- symbols and lineage (the symbol index and lineage.py) ----------------------------------

    def symbols(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> list[Symbol]:
        """Return the symbols of one pass (top level and subsymbols, in walk order)."""
        return self._symbol_index.symbols(ref, chain, index)

    def chain_symbols(self, graph: int, chain: str) -> list[Symbol]:
        """Return the symbols of every pass of one chain, by pass then position."""
        return self._symbol_index.chain_symbols(graph, chain)

    def matching_symbols(self, ref: PassLike, rule: SymbolRule) -> list[Symbol]:
        """Return the symbols of pass ``ref`` that ``rule`` (a :class:`~.symbol_rows.SymbolRule`,
        e.g. ``TORCH_NOTED``) selects, in walk order, reading only the matching rows."""
        return self._symbol_index.matching_symbols(ref, rule)

    def symbols_at_line(self, line: int, graph: Optional[int] = None) -> list[Symbol]:
        """Return every symbol (any pass) whose source line is ``line``, optionally in one graph."""
        return self._symbol_index.symbols_at_line(line, graph)

    def symbols_with_uid(self, graph: int, uid: str) -> list[Symbol]:
        """Return every stored occurrence of ``uid`` in ``graph`` (one per pass it survives)."""
        return self._symbol_index.symbols_with_uid(graph, uid)

    def symbol(self, ref: Union[PassRef, PassInfo], uid: str) -> SymbolDetail:
        """Return the :class:`SymbolDetail` of symbol ``uid`` in pass ``ref``; :class:`UnknownItem`
        when that pass has no such symbol."""
        from .lineage import symbol_detail
        return symbol_detail(self, _pass_key(ref, None, None), uid)

    def lineage_of_uid(self, graph: int, uid: str) -> Lineage:
        """Return the lineage of symbol ``uid`` in ``graph`` (and its twins in the other chains)."""
        from .lineage import lineage_of_uid
        return lineage_of_uid(self, graph, uid)

    def lineage_of_source(self, file: str, line: int, graph: Optional[int] = None) -> list[Lineage]:
        """Return the lineage of every symbol from ``file:line``, one per graph that has some."""
        from .lineage import lineage_of_source
        return lineage_of_source(self, file, line, graph)

    # -- kernels compiled ahead of time for GPU targets -------------------------------------------

    def kernel_builds(self, kernel: Optional[KernelInfo] = None, target: Optional[str] = None) -> list:
        """Return the ``KernelBuild`` s (recording/builds.py) of one kernel, or of every kernel, per
        GPU target (``target``: only ``sm_90``); empty for a run without ``--target``."""
        from .builds import read_builds
        with self.snapshot():
            out = (read_builds(self, kernel.graph, kernel.chain, kernel.name) if kernel is not None
                   else read_builds(self))
        return [b for b in out if target is None or b.target == target]

    def roofline_costs(self) -> dict:
        """Return the roofline costs stored with each chain's final pass: {(graph, chain): [Cost]}
        in call order (``compiler.roofline_cost.Cost``; recording/costs.py); {} for recordings
        written before the table."""
        from .costs import read_costs
        with self.snapshot():
            return read_costs(self)

    def build_stages(self, build) -> Optional[object]:
        """Return the ``BuildStages`` (compiled stage texts and line maps) of a ``KernelBuild``,
        None when it has none (failed, unplanned or unfinished)."""
        from .builds import read_stages
        return read_stages(self, build)
