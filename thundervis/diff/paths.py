"""Which path ran each fusion, compared between two runs.

On the CPU each fusion runs through torch or Inductor, whichever its first calls measured faster
(``kernel_path`` events, :func:`thundervis.present.kernel_runs.kernel_runs`). Two runs can fuse
exactly the same regions and still run them differently (17 via torch and 37 via Inductor against
28 and 26): that is a difference in what ran, and :func:`compare_paths` reports it, per run as
counts and per matched fusion as ``torch -> inductor``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from thundervis.present.units import plural

SHOWN = 12  # fusions listed by name; the rest are counted


def fusion_paths(events) -> dict:
    """Return ``{(graph, chain, kernel name): "cpu via torch"}`` (device and path) for every kernel
    whose path a recording's ``events`` hold."""
    from thundervis.present.kernel_runs import kernel_runs
    return {key: f"{run.device} via {run.via}" for key, run in kernel_runs(events).items()}


@dataclass(frozen=True)
class PathChange:
    """A fusion both runs made, run through another path: its graph in each run, its chain, its
    name and path in each."""

    graph_a: int
    graph_b: int
    chain: str
    name_a: str
    name_b: str
    via_a: str
    via_b: str

    def describe(self) -> str:
        """``graph 0 forward fw_fusion_3: cpu via torch -> cpu via inductor``."""
        names = self.name_a if self.name_a == self.name_b else f"{self.name_a} / {self.name_b}"
        return f"graph {self.graph_a} {self.chain} {names}: {self.via_a} -> {self.via_b}"

    def as_json(self) -> dict:
        """Return the change as a JSON-able dict."""
        return {"graph_a": self.graph_a, "graph_b": self.graph_b, "chain": self.chain, "name_a": self.name_a,
                "name_b": self.name_b, "via_a": self.via_a, "via_b": self.via_b}


@dataclass(frozen=True)
class PathComparison:
    """How many fusions each path ran in each run (``counts_a``/``counts_b``: path -> fusions), and
    the matched fusions whose path differs."""

    counts_a: tuple
    counts_b: tuple
    changes: tuple

    @property
    def differs(self) -> bool:
        """True when the runs ran their fusions through different paths."""
        return bool(self.changes) or self.counts_a != self.counts_b

    def lines(self) -> list[str]:
        """Return the text lines ``diff A B`` prints (none when the paths are the same)."""
        if not self.differs:
            return []
        def counts(c) -> str:  # noqa: E306
            return ", ".join(f"{n} via {via.split(' via ', 1)[-1]}" for via, n in c) or "none recorded"
        out = [f"paths that ran the fusions differ: A {counts(self.counts_a)}; B {counts(self.counts_b)}"]
        out += [f"  {c.describe()}" for c in self.changes[:SHOWN]]
        if len(self.changes) > SHOWN:
            rest = len(self.changes) - SHOWN
            out.append(f"  ... {plural(rest, 'more fusion')} run through another path (--json lists all)")
        return out

    def as_json(self) -> dict:
        """Return ``{"a": {path: n}, "b": {path: n}, "changes": [...], "lines": [...]}`` (``lines``:
        :meth:`lines`, what the views print)."""
        return {"a": dict(self.counts_a), "b": dict(self.counts_b), "changes": [c.as_json() for c in self.changes],
                "lines": self.lines()}


def compare_paths(changes, paths_a: dict, paths_b: dict) -> PathComparison:
    """Return the :class:`PathComparison` of two runs from their fusion changes
    (``diff.runs.FusionChange``; a ``same`` or ``executor-changed`` one pairs a fusion of each run)
    and each run's :func:`fusion_paths`."""
    def via(paths, f):
        return paths.get((f.graph, f.chain, f.name))
    count_a = Counter(v for c in changes for f in c.a if (v := via(paths_a, f)) is not None)
    count_b = Counter(v for c in changes for f in c.b if (v := via(paths_b, f)) is not None)
    moved = []
    for c in changes:
        if len(c.a) == 1 and len(c.b) == 1 and c.kind in ("same", "executor-changed"):
            fa, fb = c.a[0], c.b[0]
            va, vb = via(paths_a, fa), via(paths_b, fb)
            if va is not None and vb is not None and va != vb:
                moved.append(PathChange(fa.graph, fb.graph, c.chain, fa.name, fb.name, va, vb))
    return PathComparison(tuple(sorted(count_a.items())), tuple(sorted(count_b.items())), tuple(moved))
