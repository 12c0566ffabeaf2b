"""Numerics rows: what ``thundervis numerics``, ``ls``, the TUI and the widget show of
``run --check-numerics`` and ``run --compare-eager`` (one owner for the rows, the order and the
wording). Reads only through the reader; no torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from .units import format_error, plural

# Worst first: how the numerics screen orders kernels.
VERDICT_ORDER = ("flagged", "error", "ok", "skipped", "not checked")
MARKS = {"flagged": "✗", "error": "!", "ok": "✓", "skipped": "~", "not checked": " "}


@dataclass(frozen=True)
class NumericsRow:
    """One recorded kernel with its check: ``verdict`` is ``not checked`` when the run did not
    check it (not called in the first K steps, or the run was not checked)."""

    kernel_id: Optional[int]
    graph: int
    chain: str
    kernel: str
    executor: str
    calls: int
    max_rel: Optional[float]
    eager_rel: Optional[float]
    ratio: Optional[float]
    tolerance: Optional[float]
    max_abs: Optional[float]
    verdict: str
    detail: str
    sources: tuple = ()
    uid: Optional[str] = None  # the fusion symbol (its trace line gets the verdict's mark)
    ran: str = ""  # where and how it ran (present.status.path_text: ``cpu via torch``); "" not recorded

    @property
    def ran_text(self) -> str:
        """The table's ``ran`` column: where and how the kernel ran, else its executor."""
        return self.ran or self.executor

    @property
    def mark(self) -> str:
        """One character for a table column or a trace line marker."""
        return MARKS.get(self.verdict, "?")

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        from thundervis.recording.numerics import _json_number
        return {k: (_json_number(v) if not isinstance(v, tuple) else list(v)) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class NumericsSummary:
    """Every kernel row, the compare-eager rows (``EagerComparison``) and the counts."""

    rows: tuple
    eager: tuple

    @property
    def checked(self) -> int:
        """Kernels that were checked."""
        return sum(1 for r in self.rows if r.verdict != "not checked")

    @property
    def flagged(self) -> int:
        """Kernels whose error is beyond eager's."""
        return sum(1 for r in self.rows if r.verdict == "flagged")

    def by_verdict(self) -> list:
        """Rows worst verdict first, then as recorded."""
        return sorted(self.rows, key=lambda r: VERDICT_ORDER.index(r.verdict) if r.verdict in VERDICT_ORDER else 9)

    def verdict_of(self, graph: int, chain: str, kernel: str) -> Optional[NumericsRow]:
        """The row of one kernel, or None."""
        return self._by_kernel.get((graph, chain, kernel))

    @cached_property
    def _by_kernel(self) -> dict:
        # A table asks once per kernel: an index, not a scan of every row per kernel.
        out: dict = {}
        for r in self.rows:
            out.setdefault((r.graph, r.chain, r.kernel), r)
        return out

    def as_json(self) -> dict:
        """Return a JSON-able dict: kernels, eager comparisons, checked and flagged counts."""
        return {"kernels": [r.as_json() for r in self.rows], "eager": [e.as_json() for e in self.eager],
                "checked": self.checked, "flagged": self.flagged}


def numerics_summary(rec, runs: Optional[dict] = None) -> NumericsSummary:
    """Return the numerics of an open recording: one row per recorded kernel (checked or not, in
    the recording's order; checked kernels the recording no longer lists come last), each saying
    where it ran. ``runs``: ``present.status.kernel_runs`` when the caller has read it (else it is
    read here, only for a checked recording)."""
    from .status import kernel_runs, path_text
    checks = {(k.graph, k.chain, k.kernel): k for k in rec.kernel_numerics()}
    rows = []
    kernels = rec.kernel_labels() if checks else []
    if checks and runs is None:
        runs = kernel_runs(rec.events("kernel_fallback") + rec.events("kernel_path"))
    runs = runs or {}
    for k in kernels:
        key = (k.graph, k.chain, k.name)
        c = checks.pop(key, None)
        rows.append(_row(k.id, k.graph, k.chain, k.name, k.executor, c, tuple(k.sources),
                         path_text(runs.get(key))))
    for (g, chain, name), c in checks.items():
        rows.append(_row(None, g, chain, name, c.executor, c, (), path_text(runs.get((g, chain, name)))))
    return NumericsSummary(tuple(rows), tuple(rec.eager_comparisons()))


def _row(kid, graph, chain, name, executor, c, sources, ran: str = "") -> NumericsRow:
    if c is None:
        return NumericsRow(kid, graph, chain, name, executor, 0, None, None, None, None, None, "not checked", "",
                           sources, ran=ran)
    return NumericsRow(kid, graph, chain, name, executor or c.executor, c.calls, c.max_rel_error,
                       c.eager_rel_error, c.ratio, c.tolerance, c.max_abs_error, c.verdict, c.detail, sources,
                       c.uid, ran)


def fmt_ratio(v: Optional[float]) -> str:
    """A ratio to eager's error."""
    if v is None:
        return "-"
    return f"{v:.1f}x" if v < 1e4 else f"{v:.1e}x"


def row_line(r: NumericsRow, width: int = 13) -> str:
    """One table line of a kernel row (recorded strings not yet made visible: callers do);
    ``width``: the ``ran`` column's (:func:`ran_width`)."""
    detail = f"  {r.detail}" if r.detail else ""
    return (f"{r.mark} {r.kernel:<16} {r.graph:>2} {r.chain:<9} {r.ran_text:<{width}} "
            f"{format_error(r.max_rel):>9} {format_error(r.eager_rel):>9} {fmt_ratio(r.ratio):>8}  {r.verdict}{detail}")


def ran_width(rows) -> int:
    """The ``ran`` column's width for ``rows``: its widest cell, at least the header's."""
    return max([len("ran")] + [len(r.ran_text) for r in rows])


def header(width: int = 13) -> str:
    """The table's header line for a ``ran`` column ``width`` wide."""
    return (f"  {'kernel':<16} {'g':>2} {'chain':<9} {'ran':<{width}} {'max rel':>9} {'eager rel':>9} "
            f"{'ratio':>8}  verdict")



def eager_line(e) -> str:
    """One line of a compare-eager result."""
    what = "gradients" if e.chain == "backward" else "outputs"
    extra = f" ({e.detail})" if e.detail else ""
    return (f"graph {e.graph} {e.chain:<9} {what} vs eager: max abs {format_error(e.max_abs_delta)} · "
            f"max rel {format_error(e.max_rel_delta)} over {e.calls} call{'s' if e.calls != 1 else ''}{extra}")


def summary_lines(s: NumericsSummary, flagged_only: bool = False) -> list[str]:
    """The lines ``thundervis numerics`` prints: a header, one line per kernel, the compare-eager
    lines, and last ``K kernels checked · N flagged``."""
    lines = []
    shown = [r for r in s.rows if not flagged_only or r.verdict == "flagged"]
    if shown:  # no header over no rows (``--flagged`` of a clean run: the count line says it)
        width = ran_width(shown)
        lines.append(header(width))
        lines += [row_line(r, width) for r in shown]
    if s.eager:
        lines.append("compiled vs eager ATen graph on the same inputs:")
        lines += ["  " + eager_line(e) for e in s.eager]
    not_checked = len(s.rows) - s.checked
    tail = f" · {not_checked} not checked" if not_checked else ""
    lines.append(f"{plural(s.checked, 'kernel')} checked{tail} · {s.flagged} flagged")
    return lines


def ls_lines(s: NumericsSummary) -> list[str]:
    """The lines ``ls`` (and the run summary) show: the count, each flagged kernel, compare-eager."""
    if not s.rows and not s.eager:
        return []
    lines = []
    if s.checked:
        lines.append(f"numerics  {plural(s.checked, 'kernel')} checked against float64 · {s.flagged} flagged")
        bad = [r for r in s.rows if r.verdict in ("flagged", "error")]
        width = ran_width(bad)
        lines += ["  " + row_line(r, width) for r in bad]
    for e in s.eager:
        lines.append("  " + eager_line(e))
    return lines


def verdict_cell(r: Optional[NumericsRow]) -> dict:
    """Return a kernel table's numerics cell (the widget's Fusions table, the static page): ``text``
    (``✗ flagged``; ``-`` when the kernel was not checked), ``verdict`` and ``title``, its errors in
    one line (recorded strings not yet escaped: callers do)."""
    if r is None or r.verdict == "not checked":
        return {"text": "-", "verdict": "not checked", "title": "not checked"}
    title = (f"max rel {format_error(r.max_rel)} · eager rel {format_error(r.eager_rel)} · "
             f"ratio {fmt_ratio(r.ratio)}")
    if r.detail:
        title += f" · {r.detail}"
    return {"text": f"{r.mark} {r.verdict}", "verdict": r.verdict, "title": title}


def numerics_json(s: NumericsSummary) -> Optional[dict]:
    """Return what the widget's Numerics tab shows (None when the run was not checked): a header,
    the rows worst first with their cells as text, the compare-eager lines, the counts."""
    if not s.checked and not s.eager:
        return None
    rows = []
    for r in s.by_verdict():
        d = r.as_json()
        d.update(mark=r.mark, max_rel_text=format_error(r.max_rel), eager_rel_text=format_error(r.eager_rel),
                 ratio_text=fmt_ratio(r.ratio), ran_text=r.ran_text)
        rows.append(d)
    header = f"{plural(s.checked, 'kernel')} checked against float64 · {s.flagged} flagged" if s.checked else \
        "kernels not checked (thundervis run --check-numerics)"
    return {"header": header, "rows": rows, "eager": [eager_line(e) for e in s.eager], "checked": s.checked,
            "flagged": s.flagged}
