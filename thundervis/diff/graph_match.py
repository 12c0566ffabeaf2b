"""Which compiled graph of one run is which of another's: the same signature (op sequence and
source lines) first, then, for graphs that differ (another torch version, an edited script), the
most shared source lines (Jaccard >= 0.3)."""
from __future__ import annotations


def match_graphs(a, b) -> tuple[list[tuple[int, int, str]], list[int], list[int]]:
    """Return (pairs (graph in ``a``, graph in ``b``, "identical" | "similar"), graphs only in
    ``a``, graphs only in ``b``) for two ``diff.runs.RunSide`` values."""
    pairs = []
    free_b = {g.id: g for g in b.graphs}
    by_sig: dict[str, list[int]] = {}
    for g in b.graphs:
        by_sig.setdefault(g.signature, []).append(g.id)
    left = []
    for g in a.graphs:
        ids = [i for i in by_sig.get(g.signature, []) if i in free_b]
        if ids:
            pairs.append((g.id, ids[0], "identical"))
            del free_b[ids[0]]
        else:
            left.append(g)
    # Graphs that differ (another torch version, an edited script): pair by shared source lines.
    scored = []
    for ga in left:
        for gb in free_b.values():
            union = ga.sources | gb.sources
            if union:
                j = len(ga.sources & gb.sources) / len(union)
                if j >= 0.3:
                    scored.append((-j, abs(ga.id - gb.id), ga.id, gb.id))
    used_a = set()
    for _, _, ia, ib in sorted(scored):
        if ia in used_a or ib not in free_b:
            continue
        pairs.append((ia, ib, "similar"))
        used_a.add(ia)
        del free_b[ib]
    only_a = [g.id for g in left if g.id not in used_a]
    pairs.sort()
    return pairs, only_a, sorted(free_b)
