"""A pass's printed lines, structured: the one rendering every view shows.

The printer (``compiler.printer.print_lines``) emits each line once with its text, kind, uid,
depth and spans; this module prints a recorded pass with the options every view uses (the notes of
:func:`thundervis.present.status.note_function`: why an op runs where it runs, kernels that fell
back at run time), memoised in the view's :class:`~.pass_traces.PassTraces`. ``thundervis show``
prints the lines' text, the TUI styles them by their spans, the widget sends ``as_json()``.
"""
from __future__ import annotations

from typing import Iterable

from thundervis.compiler.printer import PrintedLine, PrintOptions, print_lines, print_trace

from .errors import data_errors
from .status import note_function

TEXT = "text"  # the kind of a line that is plain text (a message, or stored text not yet mapped)


def text_lines(lines: Iterable[str]) -> list[PrintedLine]:
    """Return plain text lines (a message, or a pass's stored text shown before its trace is
    loaded) as :class:`PrintedLine` s of kind ``text``, without uids or spans."""
    return [PrintedLine(line, TEXT) for line in lines]


# The events a trace's notes are made of: run-time kernel fallbacks, and what ran each kernel
# (``ran on cpu via torch`` on a fusion's line).
NOTE_EVENTS = ("kernel_fallback", "kernel_path")


def print_options(rec, graph: int, chain: str, **options) -> PrintOptions:
    """Return the print options every view (``show``, the TUI, the widget) prints ``chain`` of
    ``graph`` of ``rec`` with: the notes of :func:`~.status.note_function` (``options`` override
    the other fields: ``uids``, ``source``, ``shapes``); ``DataError`` when the events cannot be
    read."""
    events = [e for name in NOTE_EVENTS for e in data_errors(rec.events, name)]
    return PrintOptions(notes=note_function(events, graph, chain), **options)


def trace_text(rec, trace, graph: int, chain: str, **options) -> str:
    """Return ``trace`` (a pass of ``chain`` of ``graph`` of ``rec``) printed as text with
    :func:`print_options` (``options``: ``uids``, ``source``, ``shapes``): what ``show`` prints,
    the same lines, notes included, as :func:`pass_lines` gives the TUI and the widget;
    ``DataError`` when the events cannot be read."""
    return print_trace(trace, print_options(rec, graph, chain, **options))


def pass_lines(traces, graph: int, chain: str, index: int) -> list[PrintedLine]:
    """Return the printed lines of one pass (``traces``: the view's ``PassTraces``), memoised
    there (``lines``); ``DataError`` for a pass that cannot be read."""
    def make():
        trace = traces.trace(graph, chain, index)
        opts = traces.cached_value("print options", (graph, chain),
                                   lambda: print_options(traces.rec, graph, chain), size=None)
        memo = traces.cached_value("print memo", (graph, chain), dict, size=2)  # symbols kept by passes
        return print_lines(trace, opts, memo)
    return traces.cached_value("lines", (graph, chain, index), make)
