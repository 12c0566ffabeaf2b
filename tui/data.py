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
from dataclasses import dataclass, field
from typing import Callable, Optional


from thundervis.present.errors import DataError, data_errors
from thundervis.present.overview import ViewOverview
from thundervis.present.pass_traces import PassTraces
from thundervis.present.symbol_detail import SymbolView, symbol_view


__all__ = ["DataError", "RecordingData", "SearchHit", "RerunOutcome", "open_data"]


# ------------------------------------------------------------------------------- plain objects

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
        self._traces = PassTraces(rec)  # the one trace cache, also for mapped lines and diff rows
        self._roofline_costs: dict = {}  # final pass -> its roofline costs (present.roofline.chain_costs)
        self._overview: Optional[ViewOverview] = None  # the last overview read (for its revision)

    def close(self) -> None:
        """Close the recording."""
        self._rec.close()

    @staticmethod
    def _call(fn, *args):
        return data_errors(fn, *args)

    # -- overview -------------------------------------------------------------------------------

    def revision(self) -> object:
        """Return a cheap value that changes whenever the recording changes (live polling)."""
        return self._call(self._rec.revision)

    def overview(self) -> ViewOverview:
        """Return the run, graphs (chains, passes), chain statuses, kernel rows and the count of
        collectives run between graphs (``present.overview.read_overview``); read again only
        when the recording's revision changed (``thundervis view`` validates it, then shows it)."""
        from thundervis.present.overview import read_overview
        last = self._overview
        if last is not None and self.revision() == last.revision:
            return last
        self._overview = self._call(read_overview, self._rec)
        return self._overview

    def memory(self):
        """Return the recording's ``present.memory.MemoryReport`` (DataError for damaged rows)."""
        from thundervis.present.memory import memory_report
        return self._call(memory_report, self._rec)

    def kernel_folds(self) -> tuple:
        """Return the repeated layers' kernels as ``present.kernel_folds.KernelFold`` s (the kernel
        table folds them); DataError when the kernels cannot be read."""
        from thundervis.present.kernel_folds import kernel_folds
        return self._call(kernel_folds, self._rec)

    def roofline(self) -> tuple[dict, Optional[str]]:
        """Return ({kernel id: ``present.roofline.RooflineRow``}, what it is modelled on) for the
        kernels table; reads the chains' final traces (cached per final pass): call it from a
        worker. DataError when a trace cannot be read."""
        from thundervis.present.roofline import chain_costs, roofline_rows, target_label

        def read():
            rows = roofline_rows(self._rec, None, chain_costs(self._rec, self._roofline_costs))
            return {r.kernel_id: r for r in rows if r.kernel_id is not None}, target_label(self._rec)
        return self._call(read)

    def asm_targets(self, kernel_id: int) -> list[str]:
        """Return the GPU targets kernel ``kernel_id`` was compiled for ahead of time ([] for a run
        without ``--target``)."""
        from thundervis.present.asm import kernel_targets
        return self._call(lambda: kernel_targets(self._rec, self._rec.kernel(kernel_id)))

    def asm_listing(self, kernel_id: int, target: Optional[str], stage: str):
        """Return the annotated rows of one compiled stage of one kernel (``present.asm.AsmListing``);
        DataError with one sentence when the build or stage is missing."""
        from thundervis.present.asm import AsmUnavailable, asm_listing
        try:
            return self._call(lambda: asm_listing(self._rec, self._rec.kernel(kernel_id), target, stage))
        except AsmUnavailable as e:
            raise DataError(str(e)) from None

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

    def cached(self, cache: str, key: tuple) -> bool:
        """Return whether ``key`` is already in ``cache`` (``trace``, ``lines`` or ``rows``)."""
        return self._traces.has(cache, key)

    def forget(self) -> None:
        """Drop every memoised trace, line map and diff (benchmarks measure cold steps)."""
        self._traces.clear()

    def trace(self, graph: int, chain: str, index: int):
        """Return the (validated) trace of one pass; the last few are kept."""
        return self._traces.trace(graph, chain, index)

    def trace_lines(self, graph: int, chain: str, index: int) -> list:
        """Return the printed lines of one pass (``compiler.printer.PrintedLine``: text, kind, uid,
        depth, spans), as every view prints them (``present.trace_lines``)."""
        from thundervis.present.trace_lines import pass_lines
        return pass_lines(self._traces, graph, chain, index)

    def layer_folds(self, graph: int, chain: str, index: int) -> tuple:
        """Return the folds of one pass's repeated layers (``present.trace_folds.LayerFold`` s, over
        :meth:`trace_lines`' lines), memoised."""
        from thundervis.present.trace_folds import pass_folds
        return pass_folds(self._traces, graph, chain, index)

    def diff(self, graph: int, chain: str, before: int, after: int):
        """Return the :class:`thundervis.diff.TraceDiff` from pass ``before`` to pass ``after``,
        labelled (``present.diff_labels``)."""
        from thundervis.diff.labelled import labelled_diff
        names = {p.index: p.name for p in self._chain_passes(graph, chain)}
        return labelled_diff(self.trace(graph, chain, before), self.trace(graph, chain, after), graph, chain,
                             (before, names.get(before, "?")), (after, names.get(after, "?")))

    def folded_diff(self, graph: int, chain: str, before: int, after: int) -> tuple:
        """Return ``(diff, folds)``: :meth:`diff` and its layer folds
        (``thundervis.diff.layer_folds.diff_folds``), memoised (opening a fold redraws from them)."""
        from thundervis.diff.layer_folds import diff_folds

        def make():
            d = self.diff(graph, chain, before, after)
            return d, diff_folds(d)
        return self._traces.cached_value("diff", (graph, chain, before, after), make, size=2)

    def diff_rows(self, graph: int, chain: str, before: int, after: int, side: bool,
                  context: Optional[int], opened: frozenset = frozenset()) -> tuple[list, dict]:
        """Return the display rows of a pass diff (``thundervis.diff.render`` unified or
        side-by-side rows, folded to ``context``; its repeated layers folded as ``thundervis diff``
        folds them but those whose key is in ``opened``, none when ``context`` is None: everything
        shown, as ``--full``) and its per-status counts."""
        from thundervis.diff.render import side_rows, unified_rows

        def make():
            d, folds = self.folded_diff(graph, chain, before, after)
            if context is None:
                folds = ()
            keys = frozenset(f.key for f in folds) & opened
            rows = (side_rows if side else unified_rows)(d, context, folds=folds, opened=keys)
            return rows, d.counts()
        return self._traces.cached_value("rows", (graph, chain, before, after, side, context, opened), make)

    def _chain_passes(self, graph: int, chain: str):
        g = self._call(self._rec.graph, graph)
        return self._call(g.chain, chain).passes

    # -- details --------------------------------------------------------------------------------

    def lineage(self, graph: int, uid: str) -> tuple:
        """Return the lineage of ``uid`` per chain (``present.symbol_detail.lineage_runs``)."""
        from thundervis.present.symbol_detail import lineage_runs
        return lineage_runs(self._call(self._rec.lineage_of_uid, graph, uid))

    def symbol_detail(self, graph: int, chain: str, index: int, uid: str,
                      with_lineage: bool = True) -> SymbolView:
        """Return what is known about symbol ``uid`` as of pass ``index``
        (``present.symbol_detail.SymbolView``), with its lineage through every chain's passes
        when ``with_lineage``."""
        from thundervis.recording import PassRef
        d = self._call(self._rec.symbol, PassRef(graph, chain, index), uid)
        lineage = self._call(self._rec.lineage_of_uid, graph, uid) if with_lineage else None
        return symbol_view(d, chain, lineage)

    # -- numerics -------------------------------------------------------------------------------

    def numerics(self):
        """Return the run's numerics checks (``present.numerics.NumericsSummary``)."""
        from thundervis.present.numerics import numerics_summary
        return self._call(numerics_summary, self._rec)

    def bisect(self, graph: int, chain: str, inputs: Optional[str] = None) -> tuple[list, Optional[str]]:
        """Bisect one chain (:func:`thundervis.bisect.bisect`: runs every pass, imports torch; call
        it from a worker); return (report lines, None) or ([], one sentence saying why not)."""
        try:
            from thundervis.compiler_api import bisect, report_lines
            return report_lines(self._call(bisect, self._rec, graph, chain, inputs)), None
        except DataError as e:
            return [], str(e)
        except Exception as e:  # BisectError, RerunError, torch missing: one sentence in the UI
            return [], f"bisect is not available: {str(e).splitlines()[0] if str(e) else type(e).__name__}"

    # -- kernels --------------------------------------------------------------------------------

    def rerun_results(self, kernel_id: int) -> list:
        """Return the stored re-run results of one kernel as comparison rows."""
        return [(r.executor, r.status, r.median_us, r.max_abs_error, r.max_rel_error, r.detail)
                for r in self._call(self._rec.rerun_results, kernel_id)]

    def rerun(self, kernel, executors: tuple[str, ...] = ("triton", "nvfuser", "inductor", "torch"),
              progress: Optional[Callable[[int, int, str], None]] = None) -> RerunOutcome:
        """Re-run ``kernel`` with each executor in turn (the computation is
        :func:`thundervis.rerun.rerun_kernel`, which imports torch: call this from a worker),
        calling ``progress(done, total, executor)``; errors come back in the outcome."""
        out = RerunOutcome(kernel.name)
        try:
            from thundervis.compiler_api import rerun_kernel
        except Exception as e:  # torch missing or broken: say so in the UI
            out.error = f"re-run is not available here ({type(e).__name__}: {e})"
            return out
        from thundervis.compiler_api import unavailable_executors, unavailable_note
        missing = unavailable_executors(executors)  # not installed here: no row, one note
        if missing:
            out.notes.append(unavailable_note(missing))
        executors = tuple(n for n in executors if n not in missing)
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

    def write_repro(self, kernel, folder: str = ".") -> str:
        """Write the repro script of ``kernel`` into ``folder`` (a new file name) and return its
        path; raise :class:`DataError` with one sentence when it cannot be written."""
        base = os.path.join(folder, f"repro_g{kernel.graph}_{kernel.chain}_{_safe_name(kernel.name)}")
        path, n = base + ".py", 1
        while os.path.exists(path):
            n += 1
            path = f"{base}_{n}.py"
        try:
            from thundervis.compiler_api import write_repro
            return write_repro(self.path, kernel.name, path, graph=kernel.graph, chain=kernel.chain)
        except Exception as e:
            raise DataError(f"could not write the repro script for {kernel.name} ({e})") from None

    # -- search ---------------------------------------------------------------------------------

    def search(self, query: str, graph: int, chain: str, index: int, lines: list,
               kernels: tuple, limit: int = 200) -> list[SearchHit]:
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
                hits.append(SearchHit("kernel", f"{k.label}  graph {k.graph} {k.chain}",  # present's label
                                      kernel_id=k.id))
        return hits


# ------------------------------------------------------------------------------------- helpers

def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:80] or "kernel"
