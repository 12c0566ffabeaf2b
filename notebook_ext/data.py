"""Everything the widgets read from a recording, as JSON-ready values: with :mod:`.group_data` (a
group of rank recordings, built on this module) and :mod:`.comm_data` (the run's communication)
the only modules of the notebook extension that
touch the reader API (``thundervis.recording``), the diff engine (``thundervis.diff``) and the
fusion diagrams (``thundervis.dot``).

:class:`RecordingData` builds the payload sent to the browser once (:meth:`~RecordingData.payload`:
graphs, chains, passes, each pass's trace lines, the diff of every pass against the one before,
kernels with timings, the fusion diagram) and answers the browser's later requests (a diff of any
two passes, one symbol's details and lineage, the diagram of one module). Strings go out as they
were recorded; the browser shows them with ``textContent`` and the static HTML escapes them.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Optional

from thundervis.diff import diff_traces
from thundervis.diff.lines import is_fusion
from thundervis.diff.render import fold_runs, side_rows
from thundervis.present import default_view
from thundervis.present.diff_labels import labelled, pass_label
from thundervis.present.errors import DataError, data_errors
from thundervis.present.kernel_rows import kernel_row
from thundervis.present.pass_traces import PassTraces
from thundervis.present.status import built_targets, chain_eager, fallback_reasons, kernel_runs
from thundervis.present.symbol_detail import symbol_view
from thundervis.recording import PassRef, RecordingError, UnknownItem, open_recording

from .comm_data import communication_json, diagram_notes, is_communication_op

# Above this many top-level symbols the fusion diagram starts collapsed (one node per kernel).
COLLAPSE_ABOVE = 60
# Above this many symbols in the diagram's trace Graphviz is not run for the payload (on request only).
DIAGRAM_LIMIT = 4000
# Unchanged diff rows kept around each change; the rest is folded (in Python, once).
DIFF_CONTEXT = 3
# A chain whose distinct traces hold more symbols than this is sent when the browser opens it.
INLINE_SYMBOLS = 20000


def open_source(obj):
    """Return (Recording, graph ids to show or None for all) for ``obj``: a recording path, an open
    recording, or a function/module compiled with ``thundervis.jit`` in this process. Raise
    :class:`DataError` (one sentence) for anything else."""
    from thundervis.recording import Recording
    if isinstance(obj, RecordingData):
        return obj.rec, obj.graph_ids
    if isinstance(obj, Recording):
        return obj, None
    if isinstance(obj, (str, os.PathLike)):
        try:
            return open_recording(os.fspath(obj)), None
        except RecordingError as e:
            raise DataError(str(e)) from None
    if "thundervis.session" not in sys.modules:  # nothing was compiled in this process (and no torch needed)
        raise DataError(_NOT_A_SOURCE.format(type(obj).__name__))
    from thundervis.session import flush, recording_of
    found = recording_of(obj)
    if found is not None:
        path, graphs = found
        if not graphs:
            raise DataError("this object was compiled with thundervis.jit but has not run yet: call it once, "
                            "then show it.")
        flush()
        return open_recording(path, check=False), graphs
    raise DataError(_NOT_A_SOURCE.format(type(obj).__name__))


_NOT_A_SOURCE = ("cannot show a {}: give a recording path, an open recording, or a function or module compiled "
                 "with thundervis.jit in this kernel.")


def label_of(obj) -> Optional[str]:
    """Return a title for an object compiled in this process (None for recordings and paths)."""
    from thundervis.recording import Recording
    if isinstance(obj, (str, os.PathLike, Recording, RecordingData)):
        return None
    inner = getattr(obj, "_orig_mod", obj)  # torch.compile's wrapper of a module
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    return f"{name} · compiled in this kernel"


def _source_json(s) -> Optional[dict]:
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "code": s.code, "module": s.module, "label": s.label()}


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
        self._fallbacks = None
        self._runs: dict = {}

    # -- reading ------------------------------------------------------------------------------

    def overview(self):
        """Return the recording's :class:`~thundervis.recording.Overview` (read once, cached)."""
        if self._overview is None:
            try:
                with self._lock:
                    self._overview = self.rec.overview()
            except RecordingError as e:
                raise DataError(str(e)) from None
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

    def lines_json(self, graph: int, chain: str, index: int, infos: Optional["_Interner"] = None,
                   table: Optional["_Interner"] = None) -> list:
        """Return the printed lines of one pass (``present.trace_lines``: the lines every view
        shows) as ``[uid, depth, text, info, kind, spans]`` (info: the symbol's op, source, module,
        executor, note, kernel and ``comm``: whether it is a communication op; None for lines that
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
                        "comm": is_communication_op(b.sym)}
                if infos is not None:
                    info = infos.add(info, key=(b.sym, b.source, b.executor, b.note, b.aten, b.seq_nr,
                                                is_fusion(b)))
            row = (ln.uid, ln.depth, ln.text, info, ln.kind, ln.spans)
            out.append(list(row) if table is None else table.add(list(row), key=row))
        return out

    def diff(self, graph: int, chain: str, a: int, b: int):
        """Return the :class:`~thundervis.diff.TraceDiff` of passes ``a`` -> ``b`` of one chain."""
        c = self._chain(graph, chain)
        pa, pb = self._pass(c, a), self._pass(c, b)
        d = diff_traces(self.trace(graph, chain, pa.index), self.trace(graph, chain, pb.index))
        return labelled(d, graph, chain, pa, pb)

    def diff_json(self, graph: int, chain: str, a: int, b: int) -> dict:
        """Return the side-by-side diff of passes ``a`` -> ``b`` of one chain (see :func:`diff_json`)."""
        return diff_json(self.diff(graph, chain, a, b), graph, chain, a, b)

    def _chain(self, graph: int, chain: str):
        try:
            return self._graph(graph).chain(chain)
        except UnknownItem as e:
            raise DataError(str(e) + ".") from None

    @staticmethod
    def _pass(c, which):
        try:
            return c.find_pass(which)
        except UnknownItem as e:
            raise DataError(str(e) + ".") from None

    def roofline(self) -> tuple[dict, Optional[str]]:
        """Return ({kernel id: roofline row as JSON}, what it is modelled on) from
        :mod:`thundervis.present.roofline` (``pct_of_roofline`` only for GPU-measured times); ({},
        None) when the traces cannot be read."""
        from thundervis.present.roofline import roofline_rows, target_label
        try:
            with self._lock:
                rows = roofline_rows(self.rec)
                label = target_label(self.rec)
        except RecordingError:
            return {}, None
        return {r.kernel_id: r.as_json() for r in rows if r.kernel_id is not None}, label

    def kernels_json(self, graph) -> list:
        """Return the kernels of ``graph``: ``KernelInfo.as_json()`` (ops, members, source lines,
        timing when profiled) with the kernel table's cells from ``present.kernel_rows``
        (``sources`` grouped per file, ``median``, ``share_text``, ``fallback``, ``status``,
        ``ran_on``, ``tag``: ``triton sm_90 · ran on cpu via torch``, ``label``: present.status.kernel_label)."""
        if self._fallbacks is None:
            with self._lock:
                self._runs, self._built, self._fallbacks = data_errors(lambda: (kernel_runs(
                    self.rec.events("kernel_fallback") + self.rec.events("kernel_path")), built_targets(self.rec),
                    fallback_reasons(self.rec.events("kernel_fallback"))))
        out = []
        for k in graph.kernels:
            key = (k.graph, k.chain, k.name)
            row = kernel_row(k, self._fallbacks.get(key), self._runs.get(key), targets=self._built.get(key, ())).as_json()
            out.append({**k.as_json(), **{key: row[key] for key in ("sources", "median", "share_text", "fallback",
                                                                    "status", "ran_on", "tag", "label")}})
        return out

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
        p = c.passes[-1] if index is None else self._pass(c, index)
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
        (interned in the payload's tables when given, else inline)."""
        lines, diffs = {}, {}
        held = None
        for p in c.passes:
            if p.changed or held is None:
                lines[str(p.index)] = self.lines_json(g.id, c.kind, p.index, infos, table)
                held = p.index
        for prev, p in zip(c.passes, c.passes[1:]):
            if p.changed:
                diffs[f"{prev.index}:{p.index}"] = diff_json(
                    self.diff(g.id, c.kind, prev.index, p.index), g.id, c.kind, prev.index, p.index, sources)
        diagram = None
        if with_diagram and c.passes and any(k.chain == c.kind for k in g.kernels):
            n = c.passes[-1].n_symbols
            diagram = (self.diagram(g.id, c.kind) if n <= DIAGRAM_LIMIT else
                       {"svg": None, "collapsed": True, "module": None, "modules": [], "pass": None,
                        "error": f"{n} symbols: pick a module to draw"})
        return {"lines": lines, "diffs": diffs, "diagram": diagram}

    def payload(self, *, with_diagrams: bool = True, inline=()) -> dict:
        """Return what the browser needs to step through passes without asking again: every
        graph, chain and pass, and the lines, diffs and diagram of each chain whose distinct traces
        hold at most :data:`INLINE_SYMBOLS` symbols, or that ``inline`` names as ``(graph, kind)``;
        a bigger chain comes as ``"lazy": true`` and the browser asks for it (``what: "chain"``).
        ``communication``: :func:`.comm_data.communication_json` (None when the run had none)."""
        infos, table, sources = _Interner(), _Interner(), _Interner()
        run = self.overview().run
        roofline, roofline_target = self.roofline()
        with self._lock:
            from .asm_data import build_targets
            asm_targets = build_targets(self.rec)
        graphs = []
        for g in self.graphs():
            chains = []
            for c in g.chains:
                passes, held = [], None
                for p in c.passes:
                    # an unchanged pass shows the trace of the pass before it (sent once)
                    same = held if (not p.changed and held is not None) else None
                    passes.append({"index": p.index, "name": p.name, "ms": round(p.duration_ms, 3),
                                   "changed": p.changed, "n_symbols": p.n_symbols, "same_as": same})
                    if same is None:
                        held = p.index
                size = sum(q["n_symbols"] for q in passes if q["same_as"] is None)
                chain = {"kind": c.kind, "status": c.status, "error": c.error, "eager": chain_eager(g, c),
                         "passes": passes, "lazy": False}
                if size <= INLINE_SYMBOLS or (g.id, c.kind) in inline:
                    chain.update(self.chain_json(g, c, infos=infos, table=table, sources=sources,
                                                 with_diagram=with_diagrams))
                else:
                    chain.update({"lines": None, "diffs": None, "diagram": None, "lazy": True})
                chains.append(chain)
            graphs.append({"id": g.id, "default_chain": default_view.default_chain(g), "reason": g.reason,
                           "graph_break_reason": g.graph_break_reason,
                           "compile_s": g.compile_s, "chains": chains,
                           "failures": [{"chain": f.chain, "error": f.error} for f in g.failures],
                           "kernels": [dict(k, roofline=roofline.get(k["id"]),
                                            asm_targets=asm_targets.get((g.id, k["chain"], k["name"]), []))
                                       for k in self.kernels_json(g)]})
        with self._lock:
            communication = communication_json(self.rec)
            from thundervis.present.numerics import numerics_json, numerics_summary
            numerics = numerics_json(numerics_summary(self.rec))
        return {"schema": 1, "kind": "recording", "title": self.title(), "path": self.rec.path,
                "status": run.status, "device": run.device, "graphs": graphs, "infos": infos.items,
                "lines": table.items, "sources": sources.items, "communication": communication,
                "roofline_target": roofline_target, "numerics": numerics}

    def bisect_json(self, graph: int, chain: str, inputs=None) -> dict:
        """Bisect one chain (``thundervis.bisect``: runs every pass; imports torch) and return
        ``{"lines": report lines, "error": None}``; a request it cannot answer raises DataError."""
        from thundervis.compiler import triton_mode
        triton_mode.set_for_torch()
        from thundervis.bisect import BisectError, bisect, report_lines
        from thundervis.rerun import RerunError
        if inputs not in (None, "captured", "random"):
            raise DataError("inputs are captured or random.")
        try:
            with self._lock:
                report = bisect(self.rec, graph, chain, inputs)
        except (BisectError, RerunError, UnknownItem) as e:
            raise DataError(str(e).strip("'\"").rstrip(".") + ".") from None
        return {"lines": report_lines(report), "error": None}

    def source_json(self, file: Optional[str] = None, graph: Optional[int] = None) -> dict:
        """Return the Source tab's data: ``file`` (default: the run's script when recorded, else the
        first recorded file) annotated line by line (``SourceFile.as_json()``: per line the ops,
        kernels, fallbacks, notes, time share and status); ``files`` lists the recorded files."""
        from thundervis.present.source_view import default_file, source_file
        try:
            with self._lock:
                file = file or default_file(self.rec)
                if file is None:
                    return {"file": None, "files": [], "lines": [], "summary": "this recording holds no user source files"}
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
            expand = request.get("expand")
            return self.diagram(g, c, module=request.get("module") or None, collapse=request.get("collapse"),
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


class _Interner:
    """Numbers equal JSON-able items so each distinct one is sent once; ``key`` (hashable, made
    from the item's values) names the item, so nothing is JSON-encoded to compare: the payload
    is encoded once, when it is sent."""

    def __init__(self):
        self.items: list = []
        self._index: dict = {}

    def add(self, item, key) -> int:
        """Return the number of the item named ``key`` (``item`` appended when it is new)."""
        n = self._index.get(key)
        if n is None:
            n = self._index[key] = len(self.items)
            self.items.append(item)
        return n


def diff_json(d, graph: int, chain: str, a: int, b: int, sources: Optional["_Interner"] = None) -> dict:
    """Return a TraceDiff as JSON: its labels, counts, summary and the rows of
    :func:`thundervis.diff.render.side_rows`, folded (:func:`~thundervis.diff.render.fold_runs`,
    :data:`DIFF_CONTEXT` rows of context: a run of unchanged rows becomes ``["fold", None, None,
    text, [rows]]``), as ``[status, left, right, note]`` with each cell
    ``[marker, depth, text, spans, uid, source]`` or None (``source``: the text, or with
    ``sources`` its index there, so a payload holding many diffs sends each source line once)."""
    def cell(r):
        if r is None:
            return None
        src = sources.add(r.source, key=r.source) if sources is not None else r.source
        return [r.marker, r.depth, r.text, [list(s) for s in r.spans], r.uid, src]
    def row(s):
        return [s.status, cell(s.left), cell(s.right), s.note]
    rows = []
    for x in fold_runs(side_rows(d), DIFF_CONTEXT):  # folded here, once: the browser only draws
        if isinstance(x, list):
            n = len(x)
            rows.append(["fold", None, None, f"… {n} unchanged line{'s' if n != 1 else ''} (click to show) …",
                         [row(s) for s in x]])
        else:
            rows.append(row(x))
    return {"graph": graph, "chain": chain, "a": a, "b": b, "before": d.before, "after": d.after,
            "counts": d.counts(), "summary": d.summary(), "rows": rows}


def unfolded(rows: list) -> list:
    """Return the rows of a :func:`diff_json` with its folds opened (every side-by-side row)."""
    out = []
    for r in rows:
        out.extend(r[4] if r[0] == "fold" else [r])
    return out


# -- thundervis.api.diff(a, b): two passes, or two recordings -----------------------------------------

def _pass_spec(spec, graph: Optional[int], chain: Optional[str]):
    """Split a pass selector ``(source, pass)``, ``(source, chain, pass)`` or ``(source, graph,
    chain, pass)`` into (RecordingData, graph id, chain kind, PassInfo)."""
    parts = list(spec)
    if not 2 <= len(parts) <= 4:
        raise DataError("a pass is (source, pass), (source, chain, pass) or (source, graph, chain, pass).")
    source, which = parts[0], parts[-1]
    if len(parts) >= 3:
        chain = parts[-2]
    if len(parts) == 4:
        graph = parts[1]
    data = RecordingData(*open_source(source), label=label_of(source))
    g, c = data_errors(default_view.pick_chain, data.graphs(), None if graph is None else int(graph), chain,
                       data.rec.path)
    return data, g.id, c.kind, data._pass(c, which)


def passes_diff_json(a, b, *, graph: Optional[int] = None, chain: Optional[str] = None):
    """Return (payload, TraceDiff) for the diff of two passes, each ``(source, [graph,] [chain,]
    pass)``; the sources may be different recordings (the traces align by uid, then by text)."""
    da, ga, ca, pa = _pass_spec(a, graph, chain)
    db, gb, cb, pb = _pass_spec(b, graph, chain)
    if da.rec.path == db.rec.path and (ga, ca) == (gb, cb):
        d = da.diff(ga, ca, pa.index, pb.index)
    else:
        d = diff_traces(da.trace(ga, ca, pa.index), db.trace(gb, cb, pb.index))
        d.before = pass_label(ga, ca, pa, title=da.title())
        d.after = pass_label(gb, cb, pb, title=db.title())
    out = diff_json(d, ga, ca, pa.index, pb.index)
    return {"schema": 1, "kind": "passes", "title": f"{d.before} → {d.after}", "diff": out}, d


def runs_diff_json(a, b) -> dict:
    """Return the comparison of two recordings (fusions added, removed, split, merged; kernel time
    deltas) from :mod:`thundervis.diff.runs`."""
    from thundervis.diff.runs import compare_runs, run_side_from_recording
    sides = []
    for src in (a, b):
        data = RecordingData(*open_source(src), label=label_of(src))
        try:
            label = f"{data.title()} ({os.path.basename(data.rec.path)})"
            sides.append(run_side_from_recording(data.rec, label=label))
        except RecordingError as e:
            raise DataError(str(e)) from None
    comp = compare_runs(*sides)
    return {"schema": 1, "kind": "runs", "title": f"{comp.a} → {comp.b}", "comparison": comp.as_json(),
            "text": comp.render_text()}


def is_pass_spec(x) -> bool:
    """Return True when ``x`` selects a pass (a tuple or list), not a whole recording."""
    return isinstance(x, (tuple, list))
