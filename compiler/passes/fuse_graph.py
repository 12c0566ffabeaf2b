"""The contracted dataflow graph the ``fuse`` pass grows regions on (:mod:`.fuse`): nodes are
regions (or single symbols), edges producer -> consumer, kept in a topological order so that a
search for a path between two nodes only visits the nodes ordered between them.
"""
from __future__ import annotations

from typing import Optional

from ..ir import BoundSymbol


class FusionGraph:
    """The contracted dataflow graph: nodes are regions (or single symbols), edges producer ->
    consumer. Merging keeps the node of the consumer."""

    def __init__(self, symbols: tuple[BoundSymbol, ...]):
        producer: dict[str, int] = {}
        self.succ: dict[int, set[int]] = {i: set() for i in range(len(symbols))}
        self.pred: dict[int, set[int]] = {i: set() for i in range(len(symbols))}
        for i, b in enumerate(symbols):
            for p in b.flat_inputs():
                j = producer.get(p.name)
                if j is not None and j != i:
                    self.succ[j].add(i)
                    self.pred[i].add(j)
            for p in b.flat_outputs():
                producer[p.name] = i
        self.node = list(range(len(symbols)))  # symbol index -> node id
        self.members: dict[int, list[int]] = {i: [i] for i in range(len(symbols))}
        # A topological order of the contracted graph (every edge goes up): a path a -> b only
        # passes nodes ordered between them, so searches stay inside that span instead of walking
        # everything downstream (which made fusing quadratic in the trace).
        self.ord: list[int] = list(range(len(symbols)))
        self.steps = 0  # nodes visited by searches: what the tests count to catch quadratic growth

    def has_detour(self, a: int, b: int) -> Optional[int]:
        """Return a node on a path a -> ... -> b through other nodes (None when there is none).

        The search visits nodes in the same order as an unbounded depth-first search, skipping
        only nodes ordered after ``b`` (none of them reaches ``b``), so it names the same node."""
        limit = self.ord[b]
        if self.ord[a] > limit:
            return None
        ord_, succ = self.ord, self.succ
        seen = {a, b}
        stack = [(s, s) for s in succ[a] if s != b and ord_[s] < limit]
        while stack:
            n, first = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            self.steps += 1
            for s in succ[n]:
                if s == b:
                    return first
                if s not in seen and ord_[s] < limit:
                    stack.append((s, first))
        return None

    def _span(self, start: int, edges: dict, inside) -> list[int]:
        """Return the nodes reached from ``start`` along ``edges`` whose order ``inside`` accepts."""
        ord_ = self.ord
        seen, stack = set(), [s for s in edges[start] if inside(ord_[s])]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            self.steps += 1
            stack.extend(s for s in edges[n] if s not in seen and inside(ord_[s]))
        return list(seen)

    def _reorder(self, keep: int, gone: int) -> None:
        """Give the merged node a place in the order before the edges move. Precondition: no path
        joins the two nodes except a direct edge. Between their places, what the earlier one
        reaches moves after the merged node and what reaches the later one moves before it; the
        rest keeps its place."""
        ord_ = self.ord
        u, v = (keep, gone) if ord_[keep] < ord_[gone] else (gone, keep)
        lo, hi = ord_[u], ord_[v]
        after = [n for n in self._span(u, self.succ, lambda o: o < hi) if n != v]
        if not after:
            ord_[keep] = hi
            return
        before = [n for n in self._span(v, self.pred, lambda o: o > lo) if n != u]
        if not before:
            ord_[keep] = lo
            return
        before.sort(key=ord_.__getitem__)
        after.sort(key=ord_.__getitem__)
        slots = sorted([lo, hi] + [ord_[n] for n in before] + [ord_[n] for n in after])
        for n, o in zip(before + [keep], slots):
            ord_[n] = o
        for n, o in zip(after, slots[len(slots) - len(after):]):
            ord_[n] = o

    def merge(self, keep: int, gone: int) -> None:
        """Merge node ``gone`` into node ``keep`` (no path may join them but a direct edge)."""
        self._reorder(keep, gone)
        for s in self.succ.pop(gone):
            self.pred[s].discard(gone)
            if s != keep:
                self.pred[s].add(keep)
                self.succ[keep].add(s)
        for p in self.pred.pop(gone):
            self.succ[p].discard(gone)
            if p != keep:
                self.succ[p].add(keep)
                self.pred[keep].add(p)
        self.succ[keep].discard(keep)
        self.pred[keep].discard(keep)
        moved = self.members.pop(gone)
        for i in moved:
            self.node[i] = keep
        self.members[keep] = sorted(self.members[keep] + moved)
