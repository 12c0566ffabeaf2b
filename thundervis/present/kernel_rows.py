"""The kernel table: one row per generated kernel, with its timing, run-time fallback, what ran it
(``ran on cpu via torch``) and the source column grouped per file (``modeling_gpt2.py:312, 318,
340``), built once by :func:`kernel_table` for the TUI's kernels screen, the widget's Fusions tab
and ``thundervis ls``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from thundervis.recording.model import KernelRef

from .chain_times import chain_time_text
from .status import (FELL_BACK_TEXT, KernelRun, built_targets, clock_label, fallback_reasons, kernel_runs, plan_note, ran_on_text,
                     tag_text)
from .units import format_gbps, format_pct, format_roofline_us, format_share, format_us


def group_sources(source_lines, limit: Optional[int] = None) -> str:
    """Return source lines (dicts with ``file`` and ``line``, or ``file:line`` labels) grouped per
    file, base names, lines in numeric order: ``modeling_gpt2.py:312, 318, 340; train.py:9``;
    ``limit``: at most that many line numbers, then `` …``."""
    files: dict[str, set] = {}
    for s in source_lines:
        if isinstance(s, dict):
            file, line = s.get("file"), s.get("line")
        else:
            file, _, line = str(s).rpartition(":")
        try:
            line = int(line)
        except (TypeError, ValueError):
            continue
        if line <= 0:
            continue
        files.setdefault(str(file or "?").replace("\\", "/").rsplit("/", 1)[-1], set()).add(line)
    parts, shown, cut = [], 0, False
    for file, lines in files.items():
        nums = sorted(lines)
        if limit is not None and shown + len(nums) > limit:
            nums, cut = nums[:max(limit - shown, 0)], True
        if nums:
            parts.append(f"{file}:{', '.join(str(n) for n in nums)}")
        shown += len(nums)
        if cut:
            break
    return "; ".join(parts) + (" …" if cut else "")


SOURCES_SHOWN = 6  # source lines a kernel table's cell lists before `` …``


@dataclass(frozen=True)
class KernelRow(KernelRef):
    """One row of the kernel table: the kernel (which one: ``KernelRef``; the
    ``recording.model.KernelInfo`` fields a table shows), its timing (None: not profiled) and
    ``fallback``, why it ran in torch at run time."""

    n_ops: int
    ops: tuple[str, ...]
    members: tuple[str, ...]
    source_lines: tuple[str, ...]  # ``file.py:LINE`` labels, numeric order per file
    sources: str  # the source column: lines grouped per file
    language: Optional[str]
    note: Optional[str]  # the generator's note (present.status.plan_note: headed by its device when built for GPU targets)
    calls: Optional[int] = None
    median_us: Optional[float] = None
    share: Optional[float] = None
    gbps: Optional[float] = None
    fallback: Optional[str] = None
    ran_on: str = ""  # what ran it: ``ran on cpu via torch`` (present.status.ran_on_text); "" unknown
    # The roofline model (present.roofline) on the overview's ``roofline_target``; ``pct_of_roofline``
    # only for a time measured on a GPU.
    roofline_us: Optional[float] = None
    roofline_bound: Optional[str] = None
    bytes_moved: Optional[int] = None
    flops: Optional[int] = None
    pct_of_roofline: Optional[float] = None
    clock: str = ""  # what measured ``median_us``: "CPU" or "GPU" (present.status.clock_label); "" not profiled
    targets: tuple[str, ...] = ()  # the GPU targets it was compiled for (present.status.built_targets)
    chain_time: str = ""  # its chain's time per call (present.chain_times); "" not profiled
    run: Optional[KernelRun] = None  # what ran it: device and path (present.status.kernel_runs); None unknown
    # A folded row (present.kernel_folds.folded_table): the repeated layers' kernels it stands for,
    # which it opens as its first instance (this row's id); times summed over them. None: one kernel.
    fold: Optional[object] = None

    @property
    def tag(self) -> str:
        """What its label says in brackets: ``triton sm_90 · ran on cpu via torch`` (present.status.kernel_tag)."""
        return tag_text(self.executor, self.ran_on, self.targets)

    @property
    def label(self) -> str:
        """How views name it: ``fw_fusion_3 [triton sm_90 · ran on cpu via torch]`` (present.status.kernel_label);
        a folded row ``fw_fusion_3 × 32 [triton]`` (present.kernel_folds)."""
        return f"{self.fold.label if self.fold is not None else self.name} [{self.tag}]"

    @property
    def sources_cell(self) -> str:
        """The source column as every kernel table shows it: at most :data:`SOURCES_SHOWN` lines,
        then `` …`` (``sources`` holds them all)."""
        return group_sources(self.source_lines, limit=SOURCES_SHOWN)

    @property
    def fallback_text(self) -> str:
        """Why it ran in torch, as every view words it: ``ran in torch at run time: <error>``
        (present.status.FELL_BACK_TEXT, as a trace's note says it); "" when it did not fall back."""
        return f"{FELL_BACK_TEXT}: {self.fallback}" if self.fallback else ""

    @property
    def status(self) -> str:
        """``fell back`` (ran in torch at run time) or ``compiled``."""
        return "fell back" if self.fallback else "compiled"

    def as_json(self) -> dict:
        """Return the row as JSON values, with its cells as text (``median``, ``share_text``,
        ``gbps_text``, ``roofline_text``, ``pct_of_roofline_text``: present.units; ``-`` when not
        timed), ``run``, what ran it (``KernelRun.as_json()``, None when not recorded) and ``fold``
        (``present.kernel_folds.KernelFold.as_json()`` of a folded row, else None)."""
        return {"id": self.id, "graph": self.graph, "chain": self.chain, "name": self.name,
                "executor": self.executor, "uid": self.uid, "n_ops": self.n_ops, "ops": list(self.ops),
                "members": list(self.members), "source_lines": list(self.source_lines), "sources": self.sources,
                "language": self.language, "note": self.note, "calls": self.calls, "median_us": self.median_us,
                "share": self.share, "gbps": self.gbps, "fallback": self.fallback, "status": self.status,
                "ran_on": self.ran_on, "targets": list(self.targets), "tag": self.tag, "label": self.label,
                "median": format_us(self.median_us), "share_text": format_share(self.share),
                "gbps_text": format_gbps(self.gbps) if self.gbps else "", "roofline_us": self.roofline_us,
                "roofline_bound": self.roofline_bound, "bytes_moved": self.bytes_moved, "flops": self.flops,
                "pct_of_roofline": self.pct_of_roofline, "roofline_text": format_roofline_us(self.roofline_us),
                "pct_of_roofline_text": format_pct(self.pct_of_roofline), "chain_time": self.chain_time,
                "run": self.run.as_json() if self.run is not None else None, "fallback_text": self.fallback_text,
                "sources_cell": self.sources_cell, "fold": self.fold.as_json() if self.fold is not None else None}


def _labels(source_lines) -> tuple[str, ...]:
    text = group_sources(source_lines)
    out = []
    for part in filter(None, text.split("; ")):
        file, _, nums = part.rpartition(":")
        out.extend(f"{file}:{n}" for n in nums.split(", "))
    return tuple(out)


def kernel_row(k, fallback: Optional[str] = None, run=None, roofline=None, targets=(),
               chain_timing=None) -> KernelRow:
    """Return the :class:`KernelRow` of ``k`` (a ``recording.model.KernelInfo``); ``fallback``: why
    it ran in torch at run time (``present.status.fallback_reasons``); ``run``: what ran it (a
    ``present.status.KernelRun``, None when not recorded); ``roofline``: its
    ``present.roofline.RooflineRow`` (None: not modelled); ``targets``: the GPU targets it was
    compiled for (``present.status.built_targets``); ``chain_timing``: its chain's
    ``recording.model.ChainTiming`` (None: not profiled)."""
    t = k.timing
    return with_roofline(KernelRow(k.id, k.graph, k.chain, k.name, k.executor, k.uid, k.n_ops,
                                   tuple(str(o) for o in k.ops), tuple(str(m) for m in k.members),
                                   _labels(k.source_lines), group_sources(k.source_lines), k.language,
                                   plan_note(k.note, run, targets),
                                   t.calls if t else None, t.median_us if t else None, t.share if t else None,
                                   t.gbps if t else None, fallback, ran_on_text(run),
                                   clock=clock_label(t.device, t.clock) if t else "", targets=tuple(targets),
                                   chain_time=chain_time_text(chain_timing) or "", run=run),
                        roofline)


def with_roofline(row: KernelRow, roofline=None) -> KernelRow:
    """Return ``row`` with the roofline fields of ``roofline`` (a ``present.roofline.RooflineRow``;
    None: unchanged)."""
    if roofline is None:
        return row
    from dataclasses import replace
    r = roofline
    return replace(row, roofline_us=r.roofline_us, roofline_bound=r.bound, bytes_moved=r.bytes_read + r.bytes_written,
                   flops=r.flops, pct_of_roofline=r.pct_of_roofline)


def kernel_rows(kernels, fallbacks: dict, runs: Optional[dict] = None,
                roofline: Optional[dict] = None, built: Optional[dict] = None,
                chain_times: Optional[dict] = None) -> tuple[KernelRow, ...]:
    """Return the rows of ``kernels`` (``KernelInfo``), each with its run-time fallback from
    ``fallbacks`` (``{(graph, chain, name): reason}``), what ran it from ``runs``
    (``present.status.kernel_runs``), its roofline row from ``roofline`` (``{kernel id:
    RooflineRow}``), its GPU targets from ``built`` (``present.status.built_targets``) and its
    chain's timing from ``chain_times`` (``{(graph, chain): ChainTiming}``)."""
    runs, roofline, built, chain_times = runs or {}, roofline or {}, built or {}, chain_times or {}
    return tuple(kernel_row(k, fallbacks.get((k.graph, k.chain, k.name)), runs.get((k.graph, k.chain, k.name)),
                            roofline.get(k.id), built.get((k.graph, k.chain, k.name), ()),
                            chain_times.get((k.graph, k.chain))) for k in kernels)


# The events the kernel table reads: run-time fallbacks and what ran each kernel.
TABLE_EVENTS = ("kernel_fallback", "kernel_path", "aot_started")


def kernel_table(rec, graphs=None, events=None) -> tuple[KernelRow, ...]:
    """Return the kernel table of ``rec`` (an open ``Recording``): one :class:`KernelRow` per
    kernel of ``graphs`` (``recording.model.Graph`` s; default every graph), each with its run-time
    fallback, what ran it, the GPU targets it was built for and its chain's time per call; the
    one builder of the table ``ls``, the TUI and the widget show. ``events``: the recording's events
    when already read. Raises what the reader raises."""
    graphs = rec.graphs() if graphs is None else graphs
    if events is None:
        events = [e for name in TABLE_EVENTS for e in rec.events(name)]
    return kernel_rows([k for g in graphs for k in g.kernels], fallback_reasons(events), kernel_runs(events),
                       built=built_targets(rec, events),
                       chain_times={(c.graph, c.chain): c for g in graphs for c in g.timings.chains})


def runs_of(rows) -> dict:
    """Return ``{(graph, chain, kernel name): KernelRun}`` of the kernel table ``rows`` (those whose
    run is known), as ``present.status.kernel_runs`` keys it."""
    return {(r.graph, r.chain, r.name): r.run for r in rows if r.run is not None}
