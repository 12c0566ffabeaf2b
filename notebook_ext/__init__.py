"""Jupyter widgets for thundervis recordings (anywidget; works in JupyterLab, Notebook 7, VS Code).

``show(obj)`` opens a recording (a path, an open recording, or a function or module compiled with
``thundervis.jit`` in this kernel): graph/chain picker, pass stepper, trace or side-by-side diff,
symbol details and lineage, fusion diagram and kernel timings. Given a group folder (``*.tvgroup``,
written by ``thundervis run --nproc-per-node N``) it shows one rank with a rank picker and the
*Ranks* tab (identical or not, where the ranks differ, per-kernel skew). ``diff(a, b)`` compares
two passes or two recordings. Both also render as static HTML where no widget manager runs.
"""
from __future__ import annotations

import os
from typing import Optional

from .data import DataError, RecordingData
from .sources import is_pass_spec, label_of, open_source, passes_diff_json, runs_diff_json


def show(obj, *, graph: Optional[int] = None, chain: Optional[str] = None, pass_=None, compare=None,
         tab: str = "passes", label: Optional[str] = None, rank: Optional[int] = None):
    """Return a :class:`~.widget.RecordingWidget` for ``obj``, or a :class:`~.widget.GroupWidget`
    for a group folder (``rank``: the rank shown first, default the lowest readable one);
    ``graph``/``chain``/``pass_`` choose the first view (default: the first forward chain at its
    last pass), ``compare`` a pass to diff against, ``tab`` ``passes``, ``fusions``, ``comm`` (when
    collectives ran between the graphs), ``memory`` or (a group) ``ranks``. Raises :class:`DataError` (one
    sentence) for something that is not a recording or group, or a rank the group does not hold."""
    from .group_data import is_group_source, open_group_source
    from .widget import GroupWidget, RecordingWidget
    if tab not in ("passes", "fusions", "comm", "memory", "ranks"):
        raise DataError(f"tab is 'passes', 'fusions', 'comm', 'memory' or 'ranks', not {tab!r}.")
    # a folder is a group or nothing we can show: open_group says which (one sentence)
    if is_group_source(obj) or (isinstance(obj, (str, os.PathLike)) and os.path.isdir(obj)):
        return GroupWidget(open_group_source(obj), rank=rank, graph=graph, chain=chain, pass_=pass_,
                           compare=compare, tab=tab)
    if rank is not None:
        raise DataError(f"rank= applies to a group folder (*.tvgroup); {obj} is not one.")
    if tab == "ranks":
        raise DataError("the ranks tab is for a group folder (*.tvgroup) of a multi-process run.")
    rec, graphs = open_source(obj)
    return RecordingWidget(RecordingData(rec, graphs, label or label_of(obj)), graph=graph, chain=chain,
                           pass_=pass_, compare=compare, tab=tab)


def diff(a, b, *, graph: Optional[int] = None, chain: Optional[str] = None):
    """Return a :class:`~.widget.DiffWidget`: with ``a`` and ``b`` passes, each ``(source, pass)``,
    ``(source, chain, pass)`` or ``(source, graph, chain, pass)`` (pass: index or name; the sources
    may differ), their side-by-side diff; with ``a`` and ``b`` sources (recordings, paths, compiled
    objects), the comparison of the two runs (fusions added, removed, split, merged; kernel times)."""
    from .widget import DiffWidget
    if is_pass_spec(a) and is_pass_spec(b):
        payload, trace_diff = passes_diff_json(a, b, graph=graph, chain=chain)
        return DiffWidget(payload, trace_diff)
    if is_pass_spec(a) or is_pass_spec(b):
        raise DataError("give two passes (each a tuple like (source, 'forward', 'fuse')) or two recordings.")
    return DiffWidget(runs_diff_json(a, b))
