"""Reading the memory ledger (the ``memory_*`` tables that ``writer_memory`` fills) back, every value
checked: a damaged row is a :class:`RecordingError` naming table and column. A recording made before
the ledger existed has none of the tables: :func:`read_memory` returns None for it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .errors import RecordingError
from .typed import load_json, row_checker

TABLES = ("memory_graphs", "memory_saved", "memory_decisions", "memory_timeline", "memory_peaks")
VERDICTS = ("saved", "recomputed", "not saved")
POLICIES = ("off", "auto")
CHAINS = ("forward", "backward")


@dataclass(frozen=True)
class MemoryGraph:
    """One graph's totals: the policy that ran, saved bytes and storages, parameters, gradients,
    the static step peak, the bytes each policy's saved values hold, and an error if no ledger."""

    graph: int
    policy: str
    saved_bytes: int
    saved_tensors: int
    parameters: int
    gradients: int
    peak_bytes: int
    what_if_off: int
    what_if_auto: int
    error: Optional[str]


@dataclass(frozen=True)
class SavedTensor:
    """One tensor the forward saves for the backward (see compiler/ledger.py)."""

    graph: int
    position: int
    name: str
    shape: tuple
    dtype: str
    bytes: int
    storage: str
    storage_bytes: int
    kind: str
    counted: bool
    producer: str
    op: str
    file: str
    line: int
    code: str
    module: str
    readers: tuple
    why: str


@dataclass(frozen=True)
class Decision:
    """Both remat policies' verdicts on one value either saves."""

    graph: int
    position: int
    fx: str
    shape: tuple
    dtype: str
    bytes: int
    op: str
    off: str
    why_off: str
    auto: str
    why_auto: str


@dataclass(frozen=True)
class Peak:
    """The static peak of one final trace: bytes, symbol position, symbol, kernel, source."""

    graph: int
    chain: str
    bytes: int
    position: int
    sym: str
    kernel: str
    file: str
    line: int
    code: str
    module: str


@dataclass(frozen=True)
class Measured:
    """What one call of a chain really kept live (``run --profile``): the device, how it was measured,
    the inputs the static timeline counts live at the start, and the call's own peak above its start."""

    graph: int
    chain: str
    device: str
    method: str
    baseline_bytes: int
    peak_bytes: int

    @property
    def bytes(self) -> int:
        """The measured figure comparable with the chain's static peak."""
        return self.baseline_bytes + self.peak_bytes


@dataclass(frozen=True)
class MemoryLedger:
    """Everything the ledger tables hold; ``timeline``: {(graph, chain): [(position, uid, sym, bytes)]};
    ``measured``: :class:`Measured` rows, None when the recording predates the measurement."""

    graphs: tuple
    saved: tuple
    decisions: tuple
    timeline: dict
    peaks: tuple
    measured: Optional[tuple] = None


_GRAPHS = row_checker("memory_graphs", ("graph_id", "policy", "saved_bytes", "saved_tensors", "parameters",
                                        "gradients", "peak_bytes", "what_if_off", "what_if_auto", "error"),
                      ("nat", "text", "nat", "nat", "nat", "nat", "nat", "nat", "nat", "text?"))
_SAVED_COLS = ("graph_id", "position", "name", "shape", "dtype", "bytes", "storage", "storage_bytes", "kind",
               "counted", "producer", "op", "file", "line", "code", "module", "readers", "why")
_SAVED = row_checker("memory_saved", _SAVED_COLS, ("nat", "nat", "text", "text", "text", "nat", "text", "nat",
                                                   "text", "nat", "text", "text", "text", "nat", "text", "text",
                                                   "text", "text"))
_DECISION_COLS = ("graph_id", "position", "fx", "shape", "dtype", "bytes", "op", "off", "why_off", "auto", "why_auto")
_DECISIONS = row_checker("memory_decisions", _DECISION_COLS, ("nat", "nat", "text", "text", "text", "nat", "text",
                                                              "text", "text", "text", "text"))
_TIMELINE = row_checker("memory_timeline", ("graph_id", "chain", "position", "uid", "sym", "live_bytes"),
                        ("nat", "text", "nat", "text", "text", "nat"))
_MEASURED_COLS = ("graph_id", "chain", "device", "method", "baseline_bytes", "peak_bytes")
_MEASURED = row_checker("memory_measured", _MEASURED_COLS, ("nat", "text", "text", "text", "nat", "nat"))
_PEAK_COLS = ("graph_id", "chain", "bytes", "position", "sym", "kernel", "file", "line", "code", "module")
_PEAKS = row_checker("memory_peaks", _PEAK_COLS, ("nat", "text", "nat", "int", "text", "text", "text", "nat",
                                                  "text", "text"))


def _shape(text: str, where: str, table: str) -> tuple:
    value = load_json(text, f"{table}.shape", where, list)
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value):
        raise RecordingError(f"{where} is corrupted ({table}.shape holds something other than sizes).")
    return tuple(value)


def _one_of(value: str, allowed: tuple, column: str, where: str) -> str:
    if value not in allowed:
        raise RecordingError(f"{where} is corrupted ({column} holds {value[:20]!r}, not one of {', '.join(allowed)}).")
    return value


def read_memory(rec) -> Optional[MemoryLedger]:
    """Return the ledger stored in ``rec`` (a ``Recording``), or None when the recording predates
    the ledger (no ``memory_graphs`` table). Raises RecordingError for a damaged value."""
    if not rec.store.has_table("memory_graphs"):
        return None
    where = str(rec.path)
    with rec.store.snapshot():
        graphs = _GRAPHS(rec.store.rows("SELECT graph_id, policy, saved_bytes, saved_tensors, parameters, gradients,"
                                        " peak_bytes, what_if_off, what_if_auto, error FROM memory_graphs"
                                        " ORDER BY graph_id"), where)
        saved = _SAVED(rec.store.rows(f"SELECT {', '.join(_SAVED_COLS)} FROM memory_saved"
                                      " ORDER BY graph_id, position"), where)
        decisions = _DECISIONS(rec.store.rows(f"SELECT {', '.join(_DECISION_COLS)} FROM memory_decisions"
                                              " ORDER BY graph_id, position"), where)
        timeline = _TIMELINE(rec.store.rows("SELECT graph_id, chain, position, uid, sym, live_bytes FROM"
                                            " memory_timeline ORDER BY graph_id, chain, position"), where)
        peaks = _PEAKS(rec.store.rows(f"SELECT {', '.join(_PEAK_COLS)} FROM memory_peaks"
                                      " ORDER BY graph_id, chain"), where)
        measured = (_MEASURED(rec.store.rows(f"SELECT {', '.join(_MEASURED_COLS)} FROM memory_measured"
                                             " ORDER BY graph_id, chain"), where)
                    if rec.store.has_table("memory_measured") else None)
    for g in graphs:
        _one_of(g[1], POLICIES, "memory_graphs.policy", where)
    out_saved = []
    for r in saved:
        readers = load_json(r[16], "memory_saved.readers", where, list)
        if not all(isinstance(x, str) for x in readers):
            raise RecordingError(f"{where} is corrupted (memory_saved.readers holds something other than names).")
        out_saved.append(SavedTensor(r[0], r[1], r[2], _shape(r[3], where, "memory_saved"), r[4], r[5], r[6], r[7],
                                     r[8], bool(r[9]), r[10], r[11], r[12], r[13], r[14], r[15], tuple(readers), r[17]))
    out_dec = []
    for r in decisions:
        _one_of(r[7], VERDICTS, "memory_decisions.off", where)
        _one_of(r[9], VERDICTS, "memory_decisions.auto", where)
        out_dec.append(Decision(r[0], r[1], r[2], _shape(r[3], where, "memory_decisions"), *r[4:]))
    lines: dict = {}
    for g, chain, pos, uid, sym, live in timeline:
        lines.setdefault((g, chain), []).append((pos, uid, sym, live))
    return MemoryLedger(graphs=tuple(MemoryGraph(*g) for g in graphs), saved=tuple(out_saved),
                        decisions=tuple(out_dec), timeline=lines, peaks=tuple(Peak(*p) for p in peaks),
                        measured=None if measured is None else tuple(
                            Measured(*m) for m in measured
                            if _one_of(m[1], CHAINS + ("inference",), "memory_measured.chain", where)))
