"""A pass diff with its sides labelled: the one composition of the diff engine
(:func:`~.align.diff_traces`) and the presentation layer's labels (:mod:`thundervis.present.diff_labels`),
which every view that diffs two passes calls (``present`` sits below the tools, so it labels a diff
but cannot make one)."""
from __future__ import annotations

from thundervis.compiler.ir import Trace
from thundervis.present.diff_labels import labelled

from .align import TraceDiff, diff_traces


def labelled_diff(a: Trace, b: Trace, graph: int, chain: str, pass_a, pass_b, *, ranks=(None, None),
              titles=(None, None)) -> TraceDiff:
    """Return the diff of trace ``a`` -> ``b`` (passes ``pass_a`` and ``pass_b`` of ``chain`` of
    ``graph``: ``PassInfo`` or ``(index, name)``), its sides labelled by
    :func:`thundervis.present.diff_labels.pass_label`; ``ranks`` and ``titles`` name each side's rank
    or recording."""
    return labelled(diff_traces(a, b), graph, chain, pass_a, pass_b, ranks=ranks, titles=titles)
