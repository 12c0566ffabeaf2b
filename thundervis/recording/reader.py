"""Reading a recording: the one door through which views, commands and tests read one.

:func:`open_recording` refuses, with one sentence in a :class:`RecordingError`, a file that does not
exist, is not a thundervis recording, is truncated or corrupted, or was written with a newer schema.
Every later query turns SQLite errors into :class:`RecordingError` too. A :class:`Recording` returns
only the frozen values of :mod:`thundervis.recording.model` (the view model).

Reading never writes: the file is opened read-only (SQLite's ``immutable`` mode where nothing can
change it or the directory is not writable), so no ``-wal``/``-shm`` files are left next to a
recording that was only read. Each thread gets its own connection, so UI worker threads may call
any method; :meth:`Recording.revision` changes when another process commits (a live run), which is
what a viewer polls. Trace JSON is loaded by the compiler's validating loader; nothing is unpickled
or executed.

This module holds :func:`open_recording` and the queries of runs, graphs, kernels, passes, sources
and timings; opening and connections are :mod:`.connection`, the symbol rows and lineage queries
:mod:`.symbol_rows` (every name they define that this module used to define is re-exported here).
"""
from __future__ import annotations

import difflib
import os
import sqlite3
from typing import Optional, Union

from .connection import (SQLITE_MAGIC, RecordingConnection, RecordingError, _check_header,  # noqa: F401
                         _connect, _is_ref, _uri, open_checked)
from .model import (CHAIN_ORDER, Chain, Event, Failure, Graph, KernelInfo, KernelSource,  # noqa: F401
                    KernelTiming, Lineage, Overview, PassInfo, PassRef, RerunResult, Revision, Run,
                    SourceSnippet, Symbol, SymbolDetail, Timings, UnknownItem)
from .liveness import last_recorded, run_status
from .pass_refs import PassLike, _pass_key  # noqa: F401
from .symbol_rows import _SYMBOL_COLUMNS, SymbolRows  # noqa: F401

SNIPPET_CONTEXT = 3  # lines shown before and after a symbol's source line


def open_recording(path: str, *, check: bool = True) -> "Recording":
    """Open the recording at ``path`` read-only and return a :class:`Recording`.

    With ``check`` the whole file is verified with SQLite's ``quick_check``. Raises
    :class:`RecordingError` (one sentence) for anything that is not a readable recording."""
    path = os.path.abspath(path)
    from .rank_file import is_rank_file
    if is_rank_file(path):  # a rank of a packed group: its variant's recording with the rank's part
        from .rank_file import open_rank_file
        return open_rank_file(path, check=check)
    return Recording(path, *open_checked(path, check))


def _chain_order(kind: str) -> tuple:
    return (CHAIN_ORDER.index(kind) if kind in CHAIN_ORDER else 99, kind)


_KERNEL_COLUMNS = ("id, graph_id, chain, name, executor, uid, pass_name, language, members, ops, inputs,"
                   " outputs, source_lines, note")


class Recording(RecordingConnection, SymbolRows):
    """A recording open for reading; create it with :func:`open_recording`. Safe to use from
    several threads (one SQLite connection per thread); every method returns view-model values.
    The connections are :class:`~.connection.RecordingConnection`'s, the symbol and lineage
    queries :class:`~.symbol_rows.SymbolRows`'."""

    def __init__(self, path: str, uri: str, schema_version: int, conn: sqlite3.Connection):
        super().__init__(path, uri, schema_version, conn)
        self._init_symbol_rows()
        self._graphs_cache: Optional[tuple[Revision, list[Graph]]] = None

    # -- run and graphs -----------------------------------------------------------------------

    def run(self) -> Run:
        """Return the run row."""
        extra = "host, process_start" if self.schema_version >= 2 else "NULL, NULL"
        r = self._rows("SELECT script, module, argv, cwd, python, torch, triton, thundervis, device,"
                       f" executors, started_at, ended_at, status, exit_code, traceback, pid, {extra} FROM run")[0]
        status = run_status(r[12], r[15], r[16], r[17])
        last = last_recorded(self._conn()) if status == "killed" else None
        return Run(r[0], r[1], self._json(r[2], []), r[3], r[4], r[5], r[6], r[7], r[8],
                   self._json(r[9]), r[10], r[11], status, r[13], r[14], r[15], r[16], last)

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
            for g, c, i, n, ms, ch, ns in self._rows(
                    "SELECT graph_id, chain, idx, name, duration_ms, changed, n_symbols FROM passes"
                    " ORDER BY graph_id, chain, idx"):
                passes.setdefault((g, c), []).append(PassInfo(g, c, i, n, ms, bool(ch), ns))
            chains: dict[int, list[Chain]] = {}
            for g, kind, status, error in self._rows("SELECT graph_id, kind, status, error FROM chains"):
                chains.setdefault(g, []).append(Chain(g, kind, status, error, tuple(passes.get((g, kind), ()))))
            failures: dict[int, list[Failure]] = {}
            for f in self.failures():
                failures.setdefault(f.graph, []).append(f)
            kernels: dict[int, list[KernelInfo]] = {}
            for k in self._kernels("", (), timings):
                kernels.setdefault(k.graph, []).append(k)
            out = []
            for row in self._rows("SELECT id, compile_id, reason, recompile_reason, graph_break_reason,"
                                  " n_inputs, n_nodes, compile_s FROM graphs ORDER BY id"):
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

    def pick_chain(self, graph: Optional[int] = None, chain: Optional[str] = None) -> tuple[Graph, Chain]:
        """Return the (Graph, Chain) asked for, with the defaults every view uses: the first graph
        with a forward (or inference) chain, and its forward, inference or backward chain. Raises
        :class:`UnknownItem` naming the valid choices."""
        graphs = self._graphs()
        if not graphs:
            raise UnknownItem(f"{self.path} holds no compiled graph")
        if graph is None:
            wanted = [chain] if chain else ["forward", "inference"]
            g = next((g for g in graphs if any(c.kind in wanted for c in g.chains)), graphs[0])
        else:
            g = self.graph(graph)
        if chain is None:
            kinds = [c.kind for c in g.chains]
            chain = next((k for k in ("forward", "inference", "backward") if k in kinds),
                         kinds[0] if kinds else "forward")
        return g, g.chain(chain)

    def pick_pass(self, graph: Optional[int] = None, chain: Optional[str] = None,
                  pass_: Union[int, str, None] = None) -> tuple[Graph, Chain, PassInfo]:
        """Return the (Graph, Chain, PassInfo) asked for (``pass_``: index or name, None for the
        last pass), defaults as :meth:`pick_chain`; :class:`UnknownItem` names the valid choices."""
        g, c = self.pick_chain(graph, chain)
        if not c.passes:
            raise UnknownItem(f"graph {g.id} {c.kind} has no recorded pass")
        return g, c, (c.find_pass(pass_) if pass_ is not None else c.passes[-1])

    def failures(self) -> list[Failure]:
        """Return every recorded failure, in order."""
        return [Failure(*r) for r in self._rows(
            "SELECT graph_id, chain, error, traceback FROM failures ORDER BY id")]

    def events(self, event: Optional[str] = None) -> list[Event]:
        """Return the recorded events (all, or those named ``event``), in order."""
        where, params = ("WHERE event=?", (event,)) if event else ("", ())
        return [Event(g, c, e, self._json(d), at) for g, c, e, d, at in self._rows(
            f"SELECT graph_id, chain, event, data, at FROM events {where} ORDER BY id", params)]

    # -- kernels --------------------------------------------------------------------------------

    def _kernels(self, where: str, params: tuple, timings: Optional[Timings] = None) -> list[KernelInfo]:
        timings = self.timings() if timings is None else timings
        by_id = {k.kernel_id: k for k in timings.kernels if k.kernel_id is not None}
        by_name = {(k.graph, k.chain, k.name): k for k in timings.kernels if k.kind == "fusion"}
        out = []
        for r in self._rows(f"SELECT {_KERNEL_COLUMNS} FROM kernels {where} ORDER BY id", params):
            timing = by_id.get(r[0]) or by_name.get((r[1], r[2], r[3]))
            out.append(KernelInfo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                                  tuple(self._json(r[8], [])), tuple(self._json(r[9], [])),
                                  tuple(self._json(r[10], [])), tuple(self._json(r[11], [])),
                                  tuple(self._json(r[12], [])), r[13], timing))
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
        rows = self._rows("SELECT id, name, language, code, trace_json FROM kernels WHERE id=?", (kid,))
        if not rows:
            raise UnknownItem(f"no kernel with id {kid} in this recording")
        kid, name, language, code, trace_json = rows[0]
        from .group_store import resolve_text  # a rank file of a group: code kept in the group store
        return KernelSource(kid, name, language, resolve_text(self, code, f"code of kernel {name}"),
                            resolve_text(self, trace_json, f"region IR of kernel {name}"))

    # -- passes ---------------------------------------------------------------------------------

    def _pass_row(self, ref: PassRef) -> tuple:
        """Return (name, symbols_from, trace_json, printed, meta) of one pass, following a shared
        pass to the pass that holds its JSON and text."""
        graph, chain, index = ref.graph, ref.chain, ref.index
        with self.snapshot():
            rows = self._rows("SELECT name, symbols_from, trace_json, printed, meta FROM passes"
                              " WHERE graph_id=? AND chain=? AND idx=?", (graph, chain, index))
            if not rows:
                raise UnknownItem(f"graph {graph} {chain} has no pass {index}")
            name, held, trace_json, printed, meta = rows[0]
            if trace_json is None or printed is None:
                src = self._rows("SELECT trace_json, printed FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                                 (graph, chain, held))
                if not src or held == index or src[0][0] is None:
                    raise RecordingError(f"{self.path} is corrupted (graph {graph} {chain} pass {index} "
                                         "shares a trace that is missing).")
                trace_json, printed = src[0]
                if printed.startswith("# graph "):
                    from thundervis.compiler.ir import Trace
                    from thundervis.compiler.printer import header_line
                    header = header_line(Trace(name=chain, inputs=(), symbols=(), outputs=(), chain=chain,
                                               graph=graph, pass_name=name, meta=self._json(meta, {})))
                    printed = header + "\n" + printed.split("\n", 1)[1]
            if _is_ref(trace_json) or _is_ref(printed):  # a rank file packed into its group's store
                from .group_store import resolve_pass
                trace_json, printed = resolve_pass(self, trace_json, printed, meta,
                                                   f"graph {graph} {chain} pass {index}")
                if printed is not None:
                    from thundervis.compiler.ir import Trace
                    from thundervis.compiler.printer import header_line
                    header = header_line(Trace(name=chain, inputs=(), symbols=(), outputs=(), chain=chain,
                                               graph=graph, pass_name=name, meta=self._json(meta, {})))
                    printed = header + "\n" + printed.split("\n", 1)[1]
        return name, held, trace_json, printed, meta

    def pass_info(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> PassInfo:
        """Return the :class:`PassInfo` of one pass (a PassRef, or graph, chain, index)."""
        ref = _pass_key(ref, chain, index)
        return self.graph(ref.graph).chain(ref.chain).find_pass(ref.index)

    def pass_text(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> str:
        """Return the printed trace of one pass (a PassRef, or graph, chain, index)."""
        return self._pass_row(_pass_key(ref, chain, index))[3]

    def pass_json(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> str:
        """Return the trace JSON text of one pass as stored (see compiler/serialize.py)."""
        return self._pass_row(_pass_key(ref, chain, index))[2]

    def pass_trace(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None):
        """Return the trace (``thundervis.compiler.ir.Trace``) of one pass, loaded from its JSON by
        the validating loader."""
        from thundervis.compiler.serialize import TraceFormatError, trace_from_json
        ref = _pass_key(ref, chain, index)
        name, held, trace_json, _, meta = self._pass_row(ref)
        def kernel_names():  # older recordings: their kernels say which symbols are fusions
            return [r[0] for r in self._rows("SELECT name FROM kernels WHERE graph_id=? AND chain=?",
                                             (ref.graph, ref.chain))]
        try:
            trace = trace_from_json(trace_json, kernel_names)
        except (TraceFormatError, ValueError, TypeError) as e:
            raise RecordingError(f"{self.path} holds a damaged trace for graph {ref.graph} {ref.chain} "
                                 f"pass {ref.index} ({e}).") from None
        if held != ref.index:
            trace = trace.replace(pass_name=name, meta=self._json(meta, {}))
        return trace

    # -- the user's source ----------------------------------------------------------------------

    def source_files(self) -> list[str]:
        """Return the user source files whose text the recording holds."""
        if not self._has_table("sources"):
            return []
        return [r[0] for r in self._rows("SELECT file FROM sources ORDER BY file")]

    def source_text(self, file: str) -> Optional[str]:
        """Return the text of user source file ``file`` as it was when the run compiled it (None
        when the recording does not hold it)."""
        if not self._has_table("sources"):
            return None
        rows = self._rows("SELECT text FROM sources WHERE file=?", (file,))
        if not rows or not isinstance(rows[0][0], str):
            return None
        if _is_ref(rows[0][0]):
            from .group_store import resolve_text
            return resolve_text(self, rows[0][0], f"recorded source of {file}")
        return rows[0][0]

    def source_snippet(self, source, context: int = SNIPPET_CONTEXT) -> Optional[SourceSnippet]:
        """Return the lines around ``source`` (a SourceInfo: file, line, code) from the recorded
        file text, ``context`` lines either side; without the file text, the recorded code line."""
        if source is None or not source.line:
            return None
        text = self.source_text(source.file)
        if text is not None:
            lines = text.splitlines()
            if 1 <= source.line <= len(lines):
                first = max(1, source.line - context)
                return SourceSnippet(source.file, source.line, first,
                                     tuple(lines[first - 1:source.line + context]), True)
        return SourceSnippet(source.file, source.line, source.line, (source.code or "",), False)

    # -- timings and re-runs --------------------------------------------------------------------

    def timings(self) -> Timings:
        """Return the per-kernel and per-chain timings (empty when the run was not profiled)."""
        from .results import read_timings
        try:
            return read_timings(self._conn())
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def kernel_timing(self, kernel: KernelInfo) -> Optional[KernelTiming]:
        """Return the timing of one kernel (None when not profiled)."""
        return self.kernel(kernel.id).timing

    def kernel_numerics(self) -> list:
        """Return the ``run --check-numerics`` results, one ``KernelNumerics`` per kernel (empty:
        the run was not checked)."""
        from .numerics import read_kernel_numerics
        try:
            return read_kernel_numerics(self._conn())
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def eager_comparisons(self) -> list:
        """Return the ``run --compare-eager`` results, one ``EagerComparison`` per chain (empty:
        the run did not compare)."""
        from .numerics import read_eager_comparisons
        try:
            return read_eager_comparisons(self._conn())
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None

    def rerun_results(self, kernel_id: Optional[int] = None) -> list[RerunResult]:
        """Return the stored re-run results (of one kernel, or all), oldest first."""
        from .results import read_rerun_results
        try:
            return read_rerun_results(self._conn(), kernel_id)
        except sqlite3.Error as e:
            raise RecordingError(f"{self.path} is corrupted or truncated (SQLite: {e}).") from None
