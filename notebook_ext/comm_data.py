"""The communication a recording shows in the widgets, as JSON-ready values.

Two kinds (docs/distributed.md, "Collectives"): collectives traced INTO a graph are ops of its
traces (the trace view marks them from the line's ``comm`` flag, :func:`is_communication_op`);
collectives run BETWEEN the compiled graphs (DDP's reducer, FSDP2's hooks, the script's own
``torch.distributed`` calls) are ``collective`` events, read here through the row model of
:mod:`thundervis.recording.collectives` and laid out per place for the *Communication* tab and the
static page. Strings go out as they were recorded; the browser shows them with ``textContent`` and
the static HTML escapes them.
"""
from __future__ import annotations

from typing import Optional

from thundervis.present.collectives import CLAIM_NOTE, is_communication
from thundervis.recording import RecordingError
from thundervis.present.collectives import describe, place_text, where_text
from thundervis.present.units import format_ms, format_size
from thundervis.present.collectives import (collective_counts, collective_places, collectives,
                                              first_call_collectives, rows_by_place, trace_communication_ops)

# What the details of a communication op say (the compiler's own claim note).
COMM_NOTE = CLAIM_NOTE


def is_communication_op(sym: str) -> bool:
    """Return True when the symbol name ``sym`` is a collective or a wait traced into a graph."""
    return is_communication(sym)


def _side(v: Optional[tuple]) -> Optional[dict]:
    return None if v is None else {"graph": v[0], "chain": v[1]}


def _row_json(r) -> dict:
    out = r.as_json()
    out["text"] = describe(r)
    out["bytes_text"] = format_size(r.bytes)
    out["duration_text"] = format_ms(r.duration_ms)
    return out


def header_text(in_traces: int, between: int) -> str:
    """Return the header's compact count: ``comm: 4 in graphs · 12 between graphs`` (the parts
    that are not zero); empty when there is no communication."""
    parts = [f"{in_traces} in graphs" if in_traces else "", f"{between} between graphs" if between else ""]
    shown = " · ".join(p for p in parts if p)
    return f"comm: {shown}" if shown else ""


def communication_json(rec) -> Optional[dict]:
    """Return what the widget shows of a recording's communication, or None when it has none:
    ``in_traces`` (communication ops in the last pass of every executed chain), ``counts``
    (:class:`~thundervis.recording.collectives.CollectiveCounts` as JSON), ``header`` (the compact
    count), ``places`` (the collectives recorded one by one, per place in the order they ran:
    ``{"after", "before", "where", "rows"}``, each row ``Collective.as_json()`` plus its ``text``),
    ``by_op`` (``[op, count, bytes text]`` over the whole run) and ``run_places`` (where they ran
    over the whole run, one line each)."""
    try:
        rows = collectives(rec)
        counts = collective_counts(rec, rows)
        run_places = collective_places(rec)
        in_traces = trace_communication_ops(rec)
    except RecordingError:
        return None
    if not in_traces and not counts.between_graphs and not rows:
        return None
    places = [{"after": _side(a), "before": _side(b), "where": where_text(a, b),
               "rows": [_row_json(r) for r in found]} for a, b, found in rows_by_place(rows)]
    by_op = [[op, n, format_size(counts.bytes_by_op.get(op, 0))]
             for op, n in sorted(counts.by_op.items(), key=lambda kv: (-kv[1], kv[0]))]
    return {"in_traces": in_traces, "counts": counts.as_json(), "header": header_text(in_traces, counts.between_graphs),
            "places": places, "by_op": by_op, "run_places": [place_text(p) for p in run_places],
            "note": COMM_NOTE}


def diagram_notes(rec, graph: int, chain: str) -> dict:
    """Return the fusion diagram's communication notes of one chain for :func:`thundervis.dot.trace_graph`
    (``between``): ``{"before": [lines], "after": [lines]}``, the collectives run right before and
    right after its first call (empty lists when none, or when the recording cannot say)."""
    try:
        before, after = first_call_collectives(rec, graph, chain)
    except RecordingError:
        return {"before": [], "after": []}
    return {"before": [describe(r) for r in before], "after": [describe(r) for r in after]}
