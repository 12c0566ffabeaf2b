"""How much of the work ran compiled, counted by time and by ops, as every view says it.

Under ``thundervis run --profile`` a ``step_share`` event (:mod:`thundervis.step_share`) holds, per
measured step, its wall time and the time inside compiled chains, and for one step the ATen ops
that ran outside them, grouped by the user frames above them. :func:`compiled_share` reads it
with the chains' op counts (each chain's first trace: the ATen ops AOTAutograd handed over) and
the eager regions Dynamo reported, into one :class:`CompiledShare` whose ``text`` every view
prints, e.g. ``compiled: 62% of step time, 1,204 of 1,530 ops; eager: model.py:33-37 LSTM 38%``.
Without the event (no ``--profile``) it says what is known statically: the compiled chains' ops
per call, and that time and eager ops need ``--profile``. The event is untrusted: every field is
type-checked and capped here.
"""
from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Optional

from .units import plural, plural_word

_MAX_STEPS = 64
_MAX_PLACES = 64
_CHAINS = ("forward", "backward", "inference")


@dataclass(frozen=True)
class RegionShare:
    """The time and ops of one eager region (``where``: its wording's place and what ran, e.g.
    ``model.py:33-37 LSTM``) in the profiled step: ``pct`` of that step's wall time, ``ops``."""

    where: str
    pct: float
    ops: int

    def as_json(self) -> dict:
        """Return the fields as a dict."""
        return asdict(self)


@dataclass(frozen=True)
class CompiledShare:
    """The compiled share of a run. ``measured``: from a ``--profile`` run's steps (False: static
    only); ``time_pct``: compiled share of step time, the median of the measured steps' (None
    unless measured); ``steps``: steps
    measured; ``boundary``: how steps were cut (``optimizer.step`` or ``first chain``);
    ``instrumented``: the steps measured include kernel-timing calls (a short run);
    ``compiled_ops`` / ``total_ops``: ops in compiled chains / all ops of the profiled step (static:
    compiled ops per call of every chain, total None); ``regions``: each eager region's share of
    the profiled step (a lower bound: the profiler slows the script's Python more than its ops);
    ``elsewhere_pct``: the step's eager time in no region (loss, optimizer, Python around them);
    ``text``: the one wording; ``short``: the status bar's few words; ``note``: how it was measured."""

    measured: bool
    time_pct: Optional[float]
    steps: int
    boundary: Optional[str]
    instrumented: bool
    compiled_ops: int
    total_ops: Optional[int]
    regions: tuple
    elsewhere_pct: Optional[float]
    text: str
    short: str
    note: str

    def as_json(self) -> dict:
        """Return the value as a JSON-ready dict (``regions`` as dicts)."""
        d = asdict(self)
        d["regions"] = [r.as_json() for r in self.regions]
        return d


def _num(v) -> Optional[float]:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
        return float(v)
    return None


def _count(v) -> int:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**12 else 0


def chain_ops(graphs) -> dict:
    """Return ``{(graph id, chain kind): ops per call}`` of the forward, backward and inference
    chains of ``graphs`` (the reader's ``Graph`` objects): the symbols of each chain's first pass."""
    out = {}
    for g in graphs:
        for c in g.chains:
            if c.kind in _CHAINS and c.passes:
                out[(g.id, c.kind)] = _count(c.passes[0].n_symbols)
    return out


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def _fmt_pct(p: float) -> str:
    return "<1%" if 0 < p < 1 else ">99%" if 99 < p < 100 else f"{p:.0f}%"


def _region_key(frames: list, regions) -> Optional[object]:
    """Return the first eager region whose file and function hold one of ``frames`` (innermost
    first), or None."""
    for f in frames:
        if not (isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[2], str)):
            continue
        for r in regions:
            if r.file and r.function == f[2] and os.path.basename(r.file) == os.path.basename(f[0]):
                return r
    return None


def _where(r) -> str:
    """``model.py:33-37 LSTM``: the region's place and what ran (``EagerRegion.where``)."""
    return r.where or r.text


def compiled_share(events, graphs, regions) -> CompiledShare:
    """Return the :class:`CompiledShare` of a run from its ``step_share`` events (the last valid
    one is read), its graphs (the reader's ``Graph`` objects) and its eager regions
    (``present.eager_regions.EagerRegion``)."""
    ops_of = chain_ops(graphs)
    data = None
    for e in events:
        if getattr(e, "event", None) == "step_share" and isinstance(e.data, dict):
            data = e.data
    measured = _measured_steps(data) if data is not None else []
    if not measured:
        return _static(ops_of, regions)
    boundary = data.get("boundary") if data.get("boundary") in ("optimizer.step", "first chain") else None
    instrumented = data.get("instrumented") is True
    # the median step: one step stalled by something else on the machine moves a sum, not a median
    time_pct = round(statistics.median(_pct(c, w) for w, c in measured), 2)
    op = data.get("op_step") if isinstance(data.get("op_step"), dict) else {}
    compiled_ops = 0
    for item in (op.get("chain_calls") if isinstance(op.get("chain_calls"), list) else [])[:_MAX_PLACES]:
        if isinstance(item, list) and len(item) == 3 and isinstance(item[1], str):
            compiled_ops += ops_of.get((item[0], item[1]), 0) * _count(item[2])
    has_ops = "eager_ops" in op and "error" not in op
    eager_ops = _count(op.get("eager_ops"))
    wall = _num(op.get("wall_s")) or 0.0
    shares, elsewhere = _region_shares(op, regions, wall, has_ops)
    total_ops = compiled_ops + eager_ops if has_ops else None
    text = f"compiled: {_fmt_pct(time_pct)} of step time"
    short = f"compiled {_fmt_pct(time_pct)} of time"
    if total_ops:
        text += f", {compiled_ops:,} of {total_ops:,} {plural_word(total_ops, 'op')}"
        short += f" · {_fmt_pct(_pct(compiled_ops, total_ops))} of ops"
    if shares:
        text += "; eager: " + ", ".join(f"{s.where} {_fmt_pct(s.pct)}" for s in shares)
    elif regions:
        text += f"; eager: {plural(len(regions), 'region')} Dynamo skipped"
    cut = "between optimizer.step() calls" if boundary == "optimizer.step" else "between calls of the first graph"
    note = (f"median of {plural(len(measured), 'step')} {cut}"
            + (", while kernels were being timed" if instrumented else "")
            + ("; ops and each region's share from one profiled step" if has_ops else "; ops not measured"))
    return CompiledShare(True, time_pct, len(measured), boundary, instrumented, compiled_ops, total_ops,
                         shares, elsewhere, text, short, note)


def _measured_steps(data: dict) -> list:
    """Return the valid ``(step wall s, compiled s)`` pairs of a ``step_share`` event's data."""
    measured = []
    for w in (data.get("measured") if isinstance(data.get("measured"), list) else [])[:_MAX_STEPS]:
        if isinstance(w, list) and len(w) == 2 and _num(w[0]) is not None and _num(w[1]) is not None:
            measured.append((_num(w[0]), min(_num(w[1]), _num(w[0]))))
    return measured


def _region_shares(op: dict, regions, wall: float, has_ops: bool) -> tuple:
    """Return each eager region's :class:`RegionShare` of the profiled step (largest first) and the
    percent of the step spent in eager ops that belong to no region (None when not measured)."""
    per_region: dict = {}
    elsewhere_us = 0.0
    for place in (op.get("places") if isinstance(op.get("places"), list) else [])[:_MAX_PLACES]:
        if not isinstance(place, dict):
            continue
        frames = place.get("frames") if isinstance(place.get("frames"), list) else []
        r = _region_key(frames[:8], regions)
        us, n = _num(place.get("us")) or 0.0, _count(place.get("ops"))
        if r is None:
            elsewhere_us += us
        else:
            t = per_region.setdefault(_where(r), [0.0, 0])
            t[0] += us
            t[1] += n
    shares = tuple(RegionShare(w, min(_pct(us / 1e6, wall), 100.0), n)
                   for w, (us, n) in sorted(per_region.items(), key=lambda kv: -kv[1][0])) if wall else ()
    elsewhere = min(_pct(elsewhere_us / 1e6, wall), 100.0) if wall and has_ops else None
    return shares, elsewhere


def _static(ops_of: dict, regions) -> CompiledShare:
    """What is known without ``--profile``: the compiled chains' ops per call and the regions."""
    n_ops, n_chains = sum(ops_of.values()), len(ops_of)
    text = (f"compiled: {n_ops:,} {plural_word(n_ops, 'op')} in {plural(n_chains, 'chain')} per call"
            if n_chains else "compiled: nothing")
    if regions:
        text += f"; eager: {plural(len(regions), 'region')} Dynamo skipped"
    text += " (time and eager ops need --profile)"
    # the status bar says it only where it matters: code ran eagerly and nothing measured how much
    short = "compiled share: needs --profile" if regions else ""
    return CompiledShare(False, None, 0, None, False, n_ops, None, (), None, text, short,
                         "static: no step was measured")
