"""The view model: the typed, frozen values every view (CLI, TUI, Jupyter widget) reads.

A :class:`~thundervis.recording.reader.Recording` returns only these. Each has ``as_json()``
returning plain JSON values (what ``ls --json`` prints and what the widget sends to the browser).
Nothing here touches SQL, torch or the file: the values are built by the reader and never change.

Where things are: a pass is named by a :class:`PassRef` (graph, chain, index). The
:class:`Overview` of a run (what ``ls`` shows) holds every graph with its chains, passes,
failures, kernels (:class:`KernelInfo`, with timing, without code) and timings, plus a
:class:`Revision` a viewer compares to notice that a live run changed. Kernel code and the
region's IR (:class:`KernelSource`), pass text and traces load only on request.

The rows live in three modules, all re-exported here (import them from this module):
:mod:`.model_runs` (places, the run, graphs, chains, passes, failures, kernels, events, overview),
:mod:`.model_timings` (timings and re-run results) and :mod:`.model_symbols` (symbols, source
snippets, symbol details, lineage).
"""
from __future__ import annotations

from .model_runs import (CHAIN_ORDER, Chain, ChainRef, Event, Failure, Graph, KernelInfo, KernelRef,  # noqa: F401
                         KernelSource, Overview, PassInfo, PassRef, Revision, Run, UnknownItem, chain_position,
                         source_label)
from .model_symbols import (ChainLineage, Lineage, LineageEnd, LineageStep, SourceSnippet, Symbol,  # noqa: F401
                            SymbolDetail, _source_json)
from .model_timings import CallTimes, ChainTiming, KernelTiming, RerunResult, Timings  # noqa: F401
