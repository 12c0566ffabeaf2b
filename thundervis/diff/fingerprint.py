"""Fingerprints of traces, and which passes of a chain changed the trace.

A fingerprint hashes what a diff would show (uids, nesting and line texts), so two traces with the
same fingerprint diff as unchanged, and views can hide passes that changed nothing.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

from thundervis.compiler.ir import Trace

from .lines import trace_lines


def trace_fingerprint(trace: Trace) -> str:
    """Return a 32-hex-digit fingerprint of ``trace`` (all subsymbol levels included)."""
    h = hashlib.blake2b(digest_size=16)
    for line in trace_lines(trace, depth=1 << 30):
        h.update(f"{line.depth}\x1f{line.uid}\x1f{line.key}\x1e".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class PassChange:
    """One pass of a chain: its position, name, trace fingerprint and whether it changed the trace
    (the first pass, which creates the trace, always counts as changed)."""

    index: int
    name: str
    fingerprint: str
    changed: bool


PassLike = Union[Trace, tuple]


def pass_changes(passes: Iterable[PassLike]) -> list[PassChange]:
    """Return a :class:`PassChange` per pass. ``passes`` are traces in pipeline order, or
    ``(name, trace)`` pairs (a trace's own ``pass_name`` is used otherwise)."""
    out: list[PassChange] = []
    prev: Optional[str] = None
    for k, p in enumerate(passes):
        name, trace = (p[0], p[1]) if isinstance(p, tuple) else (p.pass_name, p)
        fp = trace_fingerprint(trace)
        out.append(PassChange(k, name, fp, prev is None or fp != prev))
        prev = fp
    return out


def changed_pass_names(passes: Sequence[PassLike]) -> list[str]:
    """Return the names of the passes that changed the trace, in order."""
    return [c.name for c in pass_changes(passes) if c.changed]


def unchanged_pass_names(passes: Sequence[PassLike]) -> list[str]:
    """Return the names of the passes that left the trace as it was (views may hide them)."""
    return [c.name for c in pass_changes(passes) if not c.changed]
