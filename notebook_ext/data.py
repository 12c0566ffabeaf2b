"""Everything the widgets read from a recording, as JSON-ready values: with :mod:`.group_data` (a
group of rank recordings, built on this module), :mod:`.comm_data` (the run's communication),
:mod:`.diff_data` (a diff's rows) and :mod:`.sources` (what ``show`` and ``diff`` accept) the only
modules of the notebook extension that touch the reader API (``thundervis.recording``), the diff
engine (``thundervis.diff``) and the fusion diagrams (``thundervis.dot``).

:class:`RecordingData` builds the payload sent to the browser once (:meth:`~RecordingData.payload`:
graphs, chains, passes, each pass's trace lines, the diff of every pass against the one before,
kernels with timings, the fusion diagram) and answers the browser's later requests (a diff of any
two passes, one symbol's details and lineage, the diagram of one module). Strings go out as they
were recorded; the browser shows them with ``textContent`` and the static HTML escapes them.
"""
from __future__ import annotations

import threading
from typing import Optional

from thundervis.diff.labelled import labelled_diff
from thundervis.diff.lines import is_fusion
from thundervis.errors import sentence
from thundervis.present import default_view
from thundervis.present.errors import DataError, data_errors
from thundervis.present.kernel_folds import folded_row_cells
from thundervis.present.kernel_rows import with_roofline
from thundervis.present.overview import read_overview
from thundervis.present.numerics import numerics_json, verdict_cell
from thundervis.present.pass_traces import PassTraces
from thundervis.present.run_status import run_status
from thundervis.present.eager_regions import beside_regions
from thundervis.present.status import chain_eager, symbol_status
from thundervis.present.symbol_detail import symbol_view
from thundervis.present.units import format_ms
from thundervis.recording import PassRef, RecordingError, UnknownItem

from .comm_data import communication_json, diagram_notes, is_communication_op
from .diff_data import Interner, diff_json

# Above this many top-level symbols the fusion diagram starts collapsed (one node per kernel).
COLLAPSE_ABOVE = 60
# Above this many symbols in the diagram's trace Graphviz is not run for the payload (on request only).
DIAGRAM_LIMIT = 4000
# The kernel table's cells a kernel of the payload carries from present.kernel_rows.KernelRow.as_json().
KERNEL_CELLS = ("sources", "sources_cell", "median", "share_text", "fallback", "fallback_text", "status", "ran_on",
                "run", "tag", "label", "roofline_text", "pct_of_roofline_text", "chain_time")
# A chain whose distinct traces hold more symbols than this is sent when the browser opens it.
INLINE_SYMBOLS = 20000


def _source_json(s) -> Optional[dict]:
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "code": s.code, "module": s.module, "label": s.label()}


def _dynamo_json(ov) -> tuple[list, list, list]:
    """Return the payload's ``dynamo_fallbacks`` (every function Dynamo ran eagerly),
    ``dynamo_rest`` (those the eager regions do not already say) and ``eager_regions`` (the code
    Dynamo left to eager, ``present.eager_regions``), each as JSON-ready dicts, from the
    recording's ``present.overview.ViewOverview`` ``ov`` (which read them once)."""
    found = ov.dynamo_fallbacks
    return ([f.as_json() for f in found], [f.as_json() for f in beside_regions(found)],
            [r.as_json() for r in ov.eager_regions])


class RecordingData:
    """JSON-ready views of one recording (optionally limited to some graphs), safe to call from
    the kernel's comm thread (one lock around the reader)."""

    def __init__(self, rec, graph_ids=None, label: Optional[str] = None):
        self.rec = rec
        self.graph_ids = tuple(graph_ids) if graph_ids else None
        self.label = label
        self._lock = threading.Lock()
        self._traces = PassTraces(rec, size=None)  # the payload reads every pass of every chain
        self._overview = None
        self._kernel_rows: Optional[dict] = None  # kernel id -> present.kernel_rows.KernelRow, read once
        self._folds: Optional[dict] = None  # kernel id -> its fold's JSON (present.kernel_folds), read once

    # -- reading ------------------------------------------------------------------------------

    def overview(self):
        """Return the recording's overview as every view reads it (``present.overview.ViewOverview``,
        as the TUI's: run, graphs, chain statuses, the kernel table, numerics), read once."""
        if self._overview is None:
            with self._lock:
                self._overview = data_errors(read_overview, self.rec)
        return self._overview

    def graphs(self) -> list:
        """Return the recorded graphs (only the selected ones)."""
        return [g for g in self.overview().graphs if self.graph_ids is None or g.id in self.graph_ids]

    def _graph(self, graph: int):
        for g in self.graphs():
            if g.id == graph:
                return g
        raise DataError(f"no graph {graph} here (graphs: {', '.join(str(g.id) for g in self.graphs()) or 'none'}).")

    def trace(self, graph: int, chain: str, index: int):
        """Return the trace of one pass (cached)."""
        return self._traces.trace(graph, chain, index)

    # -- JSON pieces --------------------------------------------------------------------------

    def lines_json(self, graph: int, chain: str, index: int, infos: Optional[Interner] = None,
                   table: Optional[Interner] = None) -> list:
        """Return the printed lines of one pass (``present.trace_lines``: the lines every view
        shows) as ``[uid, depth, text, info, kind, spans]`` (info: the symbol's op, source, module,
        executor, note, kernel, ``comm``: whether it is a communication op, and ``status``:
        ``present.status.symbol_status``, "torch op" for a fallback to torch; None for lines that
        show no symbol, and for source comments). With ``infos`` and ``table`` each info is its
        index in ``infos`` and each line its index in ``table``: a line several passes share is
        sent once."""
        from thundervis.present.trace_lines import pass_lines
        trace = self.trace(graph, chain, index)
        symbols = {}
        for b in trace.symbols:
            symbols[b.uid] = b
            for sub in b.subsymbols:
                symbols.setdefault(sub.uid, sub)
        out = []
        for ln in pass_lines(self._traces, graph, chain, index):
            b = symbols.get(ln.uid) if ln.kind in ("stmt", "sub") else None
            info = None
            if b is not None:
                info = {"sym": b.sym, "source": _source_json(b.source), "executor": b.executor, "note": b.note,
                        "aten": b.aten, "seq_nr": b.seq_nr, "kernel": b.sym if is_fusion(b) else None,
                        "comm": is_communication_op(b.sym), "status": symbol_status(b.executor, b.note)}
                if infos is not None:
                    info = infos.add(info, key=(b.sym, b.source, b.executor, b.note, b.aten, b.seq_nr,
                                                is_fusion(b)))
            row = (ln.uid, ln.depth, ln.text, info, ln.kind, ln.spans)
            out.append(list(row) if table is None else table.add(list(row), key=row))
        return out

    def diff(self, graph: int, chain: str, a: int, b: int):
        """Return the :class:`~thundervis.diff.TraceDiff` of passes ``a`` -> ``b`` of one chain."""
        c = self._chain(graph, chain)
        pa, pb = self.pass_in(c, a), self.pass_in(c, b)
        return labelled_diff(self.trace(graph, chain, pa.index), self.trace(graph, chain, pb.index), graph, chain, pa, pb)

    def diff_json(self, graph: int, chain: str, a: int, b: int) -> dict:
        """Return the side-by-side diff of passes ``a`` -> ``b`` of one chain (see :func:`diff_json`)."""
        return diff_json(self.diff(graph, chain, a, b), graph, chain, a, b)

    def _chain(self, graph: int, chain: str):
        try:
            return self._graph(graph).chain(chain)
        except UnknownItem as e:
            raise DataError(str(e) + ".") from None

    @staticmethod
    def pass_in(c, which):
        """Return the pass ``which`` (index or name) of chain ``c``; DataError (one sentence) if none."""
        try:
            return c.find_pass(which)
        except UnknownItem as e:
            raise DataError(str(e) + ".") from None

    def roofline(self) -> tuple[dict, Optional[str]]:
        """Return ({kernel id: ``present.roofline.RooflineRow``}, what it is modelled on) from
        :mod:`thundervis.present.roofline` (``pct_of_roofline`` only for GPU-measured times); ({},
        None) when the traces cannot be read."""
        from thundervis.present.roofline import roofline_rows, target_label
        try:
            with self._lock:
                rows = roofline_rows(self.rec)
                label = target_label(self.rec)
        except RecordingError:
            return {}, None
        return {r.kernel_id: r for r in rows if r.kernel_id is not None}, label

    def kernels_json(self, graph, roofline: Optional[dict] = None) -> list:
        """Return the kernels of ``graph``: ``KernelInfo.as_json()`` (ops, members, source lines,
        timing when profiled) with the kernel table's cells from ``present.kernel_rows``
        (``sources`` grouped per file, ``median`` and ``share_text`` (``-`` when not timed), ``fallback``, ``status``,
        ``ran_on``, ``tag``: ``triton sm_90 · ran on cpu via torch``, ``label``: present.status.kernel_label,
        ``roofline_text`` and ``pct_of_roofline_text`` from ``roofline``: {kernel id: RooflineRow},
        ``chain_time``: its chain's time per call, present.chain_times; ``fold``: its repeated layers'
        fold, present.kernel_folds, None when it stands alone)."""
        rows = self._read_kernel_rows()
        numerics = self.numerics_summary()
        folds = self._fold_cells()
        out = []
        for k in graph.kernels:
            key = (k.graph, k.chain, k.name)
            row = with_roofline(rows[k.id], (roofline or {}).get(k.id)).as_json()
            cells = {key: row[key] for key in KERNEL_CELLS}
            cells["fold"] = fold = folds.get(k.id)  # present.kernel_folds: a repeated layer's kernels, one row
            if fold and fold.get("folded") and fold.get("opens") == k.id:  # that row's roofline: the sum
                summed = {i: with_roofline(rows[i], (roofline or {}).get(i)) for i in fold["ids"] if i in rows}
                cells.update(folded_row_cells(summed, fold, ("roofline_text", "pct_of_roofline_text")))
            cells["numerics"] = verdict_cell(numerics.verdict_of(*key)) if numerics.checked else None
            out.append({**k.as_json(), **cells})
        return out

    def _fold_cells(self) -> dict:
        """Return {kernel id: its fold's JSON} (``present.kernel_folds.fold_json_by_kernel``), read once."""
        if self._folds is None:
            from thundervis.present.kernel_folds import fold_json_by_kernel
            rows = tuple(self._read_kernel_rows().values())
            with self._lock:
                self._folds = data_errors(fold_json_by_kernel, self.rec, [k for g in self.overview().graphs
                                                                          for k in g.kernels], rows)
        return self._folds

    def _read_kernel_rows(self) -> dict:
        """Return {kernel id: ``KernelRow``}: the kernel table every view shows
        (the overview's ``present.kernel_rows.kernel_table``: what ran each kernel, why it fell back,
        its targets)."""
        if self._kernel_rows is None:
            self._kernel_rows = {r.id: r for r in self.overview().kernels}
        return self._kernel_rows

    def numerics_summary(self):
        """Return the run's ``present.numerics.NumericsSummary`` (the overview's; the kernel table's
        verdict cells and the Numerics tab share it)."""
        return self.overview().numerics

    def diagram(self, graph: int, chain: str, index: Optional[int] = None, *, module: Optional[str] = None,
                collapse: Optional[bool] = None, expand=None) -> dict:
        """Return the fusion diagram of one pass (default: the last) as
        ``{"svg", "collapsed", "module", "modules", "blocks", "expand", "error"}``; ``collapse``
        None: collapsed when the trace has more than :data:`COLLAPSE_ABOVE` symbols. A model with
        repeated blocks is drawn one box per module block (thundervis.dot_blocks); ``expand`` lists
        the block paths drawn in full, ``blocks`` is ``[{"id", "path", "expanded"}]`` (``id``: the
        block's SVG node id, for a click to expand it; empty when not drawn by blocks). ``error``
        says why there is no SVG. The collectives run right before and after the chain's first call
        are drawn as notes."""
        from thundervis.dot import RenderError, diagram_blocks, modules_of, trace_to_svg
        c = self._chain(graph, chain)
        if not c.passes:
            return {"svg": None, "collapsed": False, "module": module, "modules": [], "error": "no recorded pass"}
        p = self.pass_in(c, default_view.diagram_pass(c) if index is None else index)
        trace = self.trace(graph, chain, p.index)
        n = len(trace.symbols)
        collapsed = n > COLLAPSE_ABOVE if collapse is None else bool(collapse)
        expand = [str(x) for x in expand or () if isinstance(x, str)]
        out = {"svg": None, "collapsed": collapsed, "module": module, "modules": modules_of(trace),
               "pass": p.index, "blocks": [], "expand": expand, "error": None}
        times = {t.name: t.median_us for t in self._graph(graph).timings.for_chain(graph, chain)}
        with self._lock:
            between = diagram_notes(self.rec, graph, chain)
        try:
            out["svg"] = trace_to_svg(trace, collapse=collapsed, module=module or None, timings=times,
                                      between=between, expand=expand)
            out["blocks"] = diagram_blocks(trace, module=module or None, expand=expand)
        except (RenderError, ValueError, ImportError) as e:
            out["error"] = str(e)
        return out

    def detail_json(self, graph: int, chain: str, index: int, uid: str) -> dict:
        """Return what the widget shows about one symbol: ``{"detail": SymbolView.as_json()}``
        (``present.symbol_detail``: source snippet, module path, what it came from and became,
        the kernel it ended in, backward twins, timing, fallback reason, its lineage through every
        pass and chain)."""
        with self._lock:
            detail = data_errors(self.rec.symbol, PassRef(graph, chain, index), uid)
            lineage = data_errors(self.rec.lineage_of_uid, graph, uid)
        return {"graph": graph, "chain": chain, "pass": index, "uid": uid,
                "detail": symbol_view(detail, chain, lineage).as_json()}

    # -- the payload ----------------------------------------------------------------------------

    def title(self) -> str:
        """Return what the widget's header says: the label, else the run's target."""
        if self.label:
            return self.label
        return self.overview().run.target

    def chain_json(self, g, c, *, infos=None, table=None, sources=None, with_diagram: bool = True) -> dict:
        """Return what the browser steps through in one chain: ``lines`` per pass that has its own
        trace, ``diffs`` of each changed pass against the one before, and the fusion ``diagram``
        (interned in the payload's tables when given, else inline), and ``folds``: each such pass's
        repeated layers (``present.trace_folds.folds_json``, line numbers index its ``lines``)."""
        from thundervis.present.trace_folds import folds_json, pass_folds
        lines, diffs, folds = {}, {}, {}
        held = None
        for p in c.passes:
            if p.changed or held is None:
                lines[str(p.index)] = self.lines_json(g.id, c.kind, p.index, infos, table)
                folds[str(p.index)] = folds_json(pass_folds(self._traces, g.id, c.kind, p.index))
                held = p.index
        for prev, p in zip(c.passes, c.passes[1:]):
            if p.changed:
                diffs[f"{prev.index}:{p.index}"] = diff_json(
                    self.diff(g.id, c.kind, prev.index, p.index), g.id, c.kind, prev.index, p.index, sources)
        diagram = None
        if with_diagram and c.passes and any(k.chain == c.kind for k in g.kernels):
            shown = self.pass_in(c, default_view.diagram_pass(c))
            n = shown.n_symbols
            diagram = (self.diagram(g.id, c.kind, shown.index) if n <= DIAGRAM_LIMIT else
                       {"svg": None, "collapsed": True, "module": None, "modules": [], "pass": None,
                        "error": f"{n} symbols: pick a module to draw"})
        return {"lines": lines, "diffs": diffs, "diagram": diagram, "folds": folds}

    def payload(self, *, with_diagrams: bool = True, inline=()) -> dict:
        """Return what the browser needs to step through passes without asking again: every
        graph, chain and pass, and the lines, diffs and diagram of each chain whose distinct traces
        hold at most :data:`INLINE_SYMBOLS` symbols, or that ``inline`` names as ``(graph, kind)``;
        a bigger chain comes as ``"lazy": true`` and the browser asks for it (``what: "chain"``).
        ``default_graph``, each graph's ``default_chain`` and each chain's ``default_pass``: where
        the view opens when nothing (or nothing valid) is picked (``present.default_view``); each
        chain's ``diagram_pass``: the pass index its fusion diagram draws (None: no pass).
        ``communication``: :func:`.comm_data.communication_json` (None when the run had none);
        ``dynamo_fallbacks``: the functions Dynamo runs eagerly (``present.status.dynamo_fallbacks``)."""
        infos, table, sources = Interner(), Interner(), Interner()
        run = self.overview().run
        roofline, roofline_target = self.roofline()
        with self._lock:
            from .asm_data import build_targets
            asm_targets = build_targets(self.rec)
        ov = self.overview()  # its compile times (forward + the lazy backward, what came from cache) and share
        graphs = []
        kinds = sorted({c.kind for g in self.graphs() for c in g.chains})
        for g in self.graphs():
            chains = []
            for c in g.chains:
                chain = self._chain_payload(g, c, inline, with_diagrams, infos=infos, table=table,
                                            sources=sources)
                chains.append(chain)
            # the chain a switch to this graph opens, per chain kind shown before (present.default_view)
            on_switch = {kind: default_view.chain_on_switch(g, kind) for kind in kinds}
            graphs.append({"id": g.id, "default_chain": default_view.default_chain(g), "chain_on_switch": on_switch,
                           "reason": g.reason,
                           "graph_break_reason": g.graph_break_reason,
                           "compile_s": g.compile_s, "compile": ov.compile_time(g.id).as_json(), "chains": chains,
                           "failures": [{"chain": f.chain, "error": f.error} for f in g.failures],
                           "kernels": [dict(k, roofline=roofline[k["id"]].as_json() if k["id"] in roofline else None,
                                            asm_targets=asm_targets.get((g.id, k["chain"], k["name"]), []))
                                       for k in self.kernels_json(g, roofline)]})
        with self._lock:
            communication = communication_json(self.rec)
            from .memory_plot import memory_tab
            memory = memory_tab(self.rec)  # the Memory tab: present.memory's figures, matplotlib's SVG
        dynamo, dynamo_rest, regions = _dynamo_json(ov)
        numerics = numerics_json(self.numerics_summary())
        shown = default_view.default_graph(self.graphs())
        return {"schema": 1, "kind": "recording", "title": self.title(), "path": self.rec.path,
                "default_graph": shown.id if shown is not None else None,
                "status": run.status, "run_status": run_status(run, len(graphs)).as_json(),  # present's words
                "device": run.device, "graphs": graphs, "infos": infos.items,
                "lines": table.items, "sources": sources.items, "communication": communication,
                "roofline_target": roofline_target, "numerics": numerics, "dynamo_fallbacks": dynamo,
                "eager_regions": regions, "dynamo_rest": dynamo_rest,
                "compiled_share": ov.compiled_share.as_json() if ov.compiled_share is not None else None,
                "abstract_lines": self._abstract_lines(), "memory": memory}  # present.abstract_fit: an abstract run's answer

    def _chain_payload(self, g, c, inline, with_diagrams: bool, *, infos, table, sources) -> dict:
        """Return chain ``c`` of graph ``g`` as :meth:`payload` sends it: its passes (an unchanged
        one points at the pass whose trace it shows) and its lines, diffs and diagram inline when
        small enough or named in ``inline``, else ``"lazy": true``. ``infos``, ``table``, ``sources``: the
        payload's interners."""
        passes, held = [], None
        for p in c.passes:
            # an unchanged pass shows the trace of the pass before it (sent once)
            same = held if (not p.changed and held is not None) else None
            passes.append({"index": p.index, "name": p.name, "ms": round(p.duration_ms, 3),
                           "ms_text": format_ms(p.duration_ms),
                           "changed": p.changed, "n_symbols": p.n_symbols, "same_as": same})
            if same is None:
                held = p.index
        size = sum(q["n_symbols"] for q in passes if q["same_as"] is None)
        chain = {"kind": c.kind, "status": c.status, "error": c.error, "eager": chain_eager(g, c),
                 "passes": passes, "lazy": False,
                 "default_pass": default_view.default_view([g], g.id, c.kind).pass_index,
                 "diagram_pass": default_view.diagram_pass(c)}
        if size <= INLINE_SYMBOLS or (g.id, c.kind) in inline:
            chain.update(self.chain_json(g, c, infos=infos, table=table, sources=sources,
                                         with_diagram=with_diagrams))
        else:
            chain.update({"lines": None, "diffs": None, "diagram": None, "lazy": True})
        return chain

    def _abstract_lines(self) -> list:
        """Return an ended abstract run's answer lines (present.abstract_fit), [] for a real run."""
        answer = self.overview().abstract  # present.overview reads it once, for every view
        return answer.text_lines() if answer is not None else []

    def bisect_json(self, graph: int, chain: str, inputs=None) -> dict:
        """Bisect one chain (``thundervis.bisect``: runs every pass; imports torch) and return
        ``{"lines": report lines, "error": None}``; a request it cannot answer raises DataError."""
        from thundervis.compiler_api import BisectError, RerunError, bisect, report_lines
        if inputs not in (None, "captured", "random"):
            raise DataError("inputs are captured or random.")
        try:
            with self._lock:
                report = bisect(self.rec, graph, chain, inputs)
        except (BisectError, RerunError, UnknownItem) as e:
            raise DataError(sentence(e)) from None
        return {"lines": report_lines(report), "error": None}

    def source_json(self, file: Optional[str] = None, graph: Optional[int] = None) -> dict:
        """Return the Source tab's data: ``file`` (default: the run's script when recorded, else the
        first recorded file) annotated line by line with the ops of ``graph`` (None: every graph)
        (``SourceFile.as_json()``: per line the ops, kernels, fallbacks, notes, time share and
        status); ``files`` lists the recorded files, ``graph_options`` the graph picker's choices."""
        from thundervis.present.source_view import default_file, source_file
        try:
            with self._lock:
                file = file or default_file(self.rec)
                if file is None:
                    return {"file": None, "files": [], "lines": [], "graph_options": [],
                            "summary": "this recording holds no user source files"}
                return source_file(self.rec, file, graph).as_json()
        except (UnknownItem, RecordingError) as e:
            raise DataError(str(e).rstrip(".") + ".") from None

    def handle(self, request: dict) -> dict:
        """Answer one request from the browser (``{"what": "diff"|"detail"|"diagram"|"chain"|"asm"|
        "bisect"|"source", ...}``; ``asm``: :func:`.asm_data.asm_json` of ``kernel`` on ``target`` and
        ``stage``)."""
        what = request.get("what")
        if what == "source":
            file, graph = request.get("file"), request.get("graph_filter")
            return self.source_json(file if isinstance(file, str) else None,
                                    graph if isinstance(graph, int) and not isinstance(graph, bool) else None)
        g, c = int(request["graph"]), str(request["chain"])
        if what == "diff":
            return self.diff_json(g, c, int(request["a"]), int(request["b"]))
        if what == "detail":
            return self.detail_json(g, c, int(request["pass"]), str(request["uid"]))
        if what == "chain":
            graph = self._graph(g)
            try:
                chain = graph.chain(c)
            except UnknownItem as e:
                raise DataError(str(e) + ".") from None
            return self.chain_json(graph, chain)
        if what == "diagram":
            expand, at = request.get("expand"), request.get("pass")  # at: the payload's diagram_pass
            return self.diagram(g, c, at if isinstance(at, int) and not isinstance(at, bool) else None,
                                module=request.get("module") or None, collapse=request.get("collapse"),
                                expand=expand if isinstance(expand, list) else None)
        if what == "asm":
            from .asm_data import AsmError, asm_json
            try:
                with self._lock:
                    return asm_json(self.rec, g, c, str(request["kernel"]), request.get("target") or None,
                                    str(request.get("stage") or "sass"))
            except (AsmError, RecordingError) as e:
                raise DataError(str(e)) from None
        if what == "bisect":
            return self.bisect_json(g, c, request.get("inputs"))
        raise DataError(f"unknown request {what!r}")
