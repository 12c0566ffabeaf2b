"""What the widgets can be given: :func:`open_source` turns a recording path, an open recording or
an object compiled with ``thundervis.jit`` in this kernel into a recording (one sentence otherwise),
:func:`label_of` titles a compiled object, and ``thundervis.api.diff(a, b)``'s two forms are built
here: :func:`passes_diff_json` (two passes, of one recording or two) and :func:`runs_diff_json` (two
whole runs)."""
from __future__ import annotations

import os
import sys
from typing import Optional

from thundervis.diff import diff_traces
from thundervis.present import default_view
from thundervis.present.diff_labels import pass_label
from thundervis.present.errors import DataError, data_errors
from thundervis.present.units import format_us
from thundervis.recording import RecordingError, open_recording

from .data import RecordingData
from .diff_data import diff_json


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
    return data, g.id, c.kind, data.pass_in(c, which)


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
    comparison = comp.as_json()
    for d in comparison["differences"]:  # the time column's cells, as every view writes times
        d["time_a_text"], d["time_b_text"] = format_us(d["time_a_us"]), format_us(d["time_b_us"])
    return {"schema": 1, "kind": "runs", "title": f"{comp.a} → {comp.b}", "comparison": comparison,
            "text": comp.render_text()}


def is_pass_spec(x) -> bool:
    """Return True when ``x`` selects a pass (a tuple or list), not a whole recording."""
    return isinstance(x, (tuple, list))
