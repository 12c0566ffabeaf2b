"""Moving between graphs (tui.navigation): a graph without the chain shown opens on the chain the
presentation layer's default view picks, never on the graph's first chain (the 1-pass dynamo one)."""
from __future__ import annotations

from types import SimpleNamespace

from thundervis.recording.model import Chain, PassInfo
from thundervis.tui.navigation import next_graph
from thundervis.tui.view_state import ViewState


def _chain(graph: int, kind: str, n_passes: int) -> Chain:
    passes = tuple(PassInfo(graph, kind, i, f"p{i}", 0.0, True, 1) for i in range(n_passes))
    return Chain(graph, kind, "compiled", None, passes)


class _Overview:
    def __init__(self, graphs):
        self.graphs = tuple(graphs)

    def chain(self, graph, kind):
        g = next(g for g in self.graphs if g.id == graph)
        return next((c for c in g.chains if c.kind == kind), None)


def test_next_graph_keeps_the_chain_kind_or_opens_the_default_chain():
    g0 = SimpleNamespace(id=0, chains=(_chain(0, "dynamo", 1), _chain(0, "forward", 5), _chain(0, "backward", 4)))
    g1 = SimpleNamespace(id=1, chains=(_chain(1, "dynamo", 1), _chain(1, "inference", 3)))
    ov = _Overview([g0, g1])
    on_backward = ViewState(graph=0, chain="backward", index=3)
    moved = next_graph(on_backward, ov)
    assert (moved.graph, moved.chain, moved.index) == (1, "inference", 2)  # not dynamo, its first chain
    back = next_graph(moved, ov)
    assert (back.graph, back.chain, back.index) == (0, "forward", 4)
    on_dynamo = ViewState(graph=1, chain="dynamo", index=0)
    assert next_graph(on_dynamo, ov).chain == "dynamo"  # the graph has that kind: kept
