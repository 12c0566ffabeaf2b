"""Collectives as text: one line per collective, per place, and the block a trace view shows
under a chain. The rows are :mod:`thundervis.recording.collectives`'; sizes and times are written
through :mod:`.units`. Recorded text is returned as is: make it terminal-safe or escape it before
showing it."""
from __future__ import annotations

from typing import Optional

from thundervis.compiler.collectives import (CLAIM_NOTE, communication_kind, is_communication,  # noqa: F401
                                             is_wait)
from thundervis.recording import Recording
from thundervis.recording.collectives import (Collective, CollectivePlace, around_chain,  # noqa: F401
                                              collective_counts, collective_places, collectives,
                                              first_call_collectives, rows_by_place, trace_communication_ops)

# The front ends read collectives only through this module (the import contracts forbid them the
# store's submodules and the compiler): the recorded rows and counts of recording.collectives, and
# the compiler's rule for which ops communicate, are re-exported here beside their wording.

from .units import format_ms, format_size

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
           "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "b8"}


def _tensor_text(items: tuple) -> str:
    parts = [f"{_DTYPES.get(d, d)}[{', '.join(str(s) for s in shape)}]" for shape, d in items[:3]]
    return ", ".join(parts) + (f" +{len(items) - 3}" if len(items) > 3 else "")


def describe(r: Collective) -> str:
    """Return one line for a collective: op, group, tensors, bytes, duration and who issued it
    (recorded text: make it terminal-safe or escape it before showing it)."""
    group = f"group of {r.group_size}" if r.group_size is not None else "group ?"
    same = r.inputs == r.outputs
    tensors = _tensor_text(r.outputs) if same else f"{_tensor_text(r.inputs)} -> {_tensor_text(r.outputs)}"
    took = f" · {format_ms(r.duration_ms)}" if r.duration_ms is not None else ""
    by = r.issued_by
    who = {"backward": "backward (DDP reducer)", "script": "the script"}.get(by, by)
    where = f" at {r.source}" if r.source else ""
    return f"{r.op} · {group} · {tensors} · {format_size(r.bytes)}{took} · by {who}{where}"


def place_text(p: CollectivePlace) -> str:
    """Return ``between graph 0 backward and graph 0 forward: 6 × all_reduce (1.1 KiB)``."""
    return f"{where_text(p.after, p.before)}: {p.count} × {p.op} ({format_size(p.bytes)})"


def where_text(after: Optional[tuple], before: Optional[tuple]) -> str:
    """Return where collectives ran from the chains around them (``(graph, chain)`` or None):
    ``between graph 0 backward and graph 0 forward``, ``before graph 0 forward, at the start of the
    run`` ..."""
    a = f"graph {after[0]} {after[1]}" if after else None
    b = f"graph {before[0]} {before[1]}" if before else None
    return (f"between {a} and {b}" if a and b else f"after {a}, at the end of the run" if a
            else f"before {b}, at the start of the run" if b else "with no compiled chain run")


def chain_collective_lines(rec: Recording, graph: int, chain: str, limit: int = 40) -> list[str]:
    """Return the text a trace view shows under ``chain`` of ``graph``: the collectives recorded
    run right before and right after its calls, call by call (at most ``limit`` rows), then the
    counts over the whole run of those run next to it. Empty when none ran next to it. Recorded
    text: make it terminal-safe or escape it before showing it."""
    before, after = around_chain(collectives(rec), graph, chain)
    places = [p for p in collective_places(rec) if (graph, chain) in (p.after, p.before)]
    if not before and not after and not places:
        return []
    lines = [f"collectives run eagerly next to graph {graph} {chain} (between compiled graphs, not in this "
             "trace; recorded at run time):"]
    groups: dict = {}
    for r in before:
        groups.setdefault((r.before.call, 0, r.after), []).append(r)
    for r in after:
        groups.setdefault((r.after.call, 1, r.before), []).append(r)
    shown = 0
    for (call, side, other), rows in sorted(groups.items(), key=lambda kv: kv[0][:2]):
        if shown >= limit:
            break
        around = f"since {other}" if side == 0 else (f"until {other}" if other else "until the end of the run")
        if side == 0 and other is None:
            around = "since the start of the run"
        lines.append(f"{'before' if side == 0 else 'after'} call {call} ({around}):")
        for r in rows[:limit - shown]:
            lines.append(f"  {describe(r)}")
        shown += len(rows)
    if shown > limit:
        lines.append(f"  ... {shown - limit} more (thundervis ls --json; the reader's collectives())")
    if places:
        lines.append("over the whole run:")
        lines.extend(f"  {place_text(p)}" for p in places)
    return lines
