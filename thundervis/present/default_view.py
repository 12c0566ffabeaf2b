"""The default view: which graph, chain and pass a view opens when the user did not say.

One rule for the CLI (``show``, ``diff``, ``dot``), the TUI, the widget (and its graph menu, which
reads each graph's :func:`default_chain` from the payload):

- graph: the first graph with a forward or inference chain that holds passes (else backward, else
  any chain with passes, else the first graph); with ``chain`` given, the first graph that has it;
- chain: the graph's forward, else inference, else backward chain, preferring one with passes,
  else its first chain;
- pass: the chain's last pass; no comparison (-1).

:func:`kept_view` is the one rule for keeping a view when what it shows changes (a live recording
grows, another rank is shown, the TUI's or widget's state names a chain or pass that is gone).
:func:`live_view`, :func:`search_target` and :func:`diagram_pass` are the other "which pass" rules:
following a live recording, where a search hit jumps, and the pass a chain's fusion diagram draws.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

_ORDER = ("forward", "inference", "backward")


@dataclass(frozen=True)
class DefaultView:
    """Where a view opens: graph id, chain kind, pass index, and the pass it compares with (-1:
    none, the trace is shown)."""

    graph: int
    chain: str
    pass_index: int
    compare_index: int = -1
    has_pass: bool = True  # False: the chain holds no recorded pass yet (pass_index is 0, nothing to show)

    def as_json(self) -> dict:
        """Return the view as ``{"graph", "chain", "pass_index", "compare_index", "has_pass"}``."""
        return {"graph": self.graph, "chain": self.chain, "pass_index": self.pass_index,
                "compare_index": self.compare_index, "has_pass": self.has_pass}


def default_chain(graph) -> Optional[str]:
    """Return the kind of the chain a view opens in ``graph`` (a ``recording.model.Graph``), or
    None when it has no chain."""
    kinds = {c.kind: bool(c.passes) for c in graph.chains}
    for want_passes in (True, False):
        for kind in _ORDER:
            if kind in kinds and (kinds[kind] or not want_passes):
                return kind
    with_passes = [c.kind for c in graph.chains if c.passes]
    return (with_passes or [c.kind for c in graph.chains] or [None])[0]


def default_graph(graphs: Sequence, chain: Optional[str] = None):
    """Return the graph a view opens among ``graphs`` (see the module docstring); None for none."""
    if not graphs:
        return None
    tiers = [(chain,)] if chain else [("forward", "inference"), ("backward",), None]
    for want_passes in (True, False):
        for kinds in tiers:
            for g in graphs:
                if any((kinds is None or c.kind in kinds) and (c.passes or not want_passes) for c in g.chains):
                    return g
    return graphs[0]


def pick_chain(graphs: Sequence, graph: Optional[int] = None, chain: Optional[str] = None,
               where: str = "the recording"):
    """Return the ``(Graph, Chain)`` asked for among ``graphs``, defaults as the module docstring
    says; raise ``recording.UnknownItem`` naming the valid choices (``where``: the recording's name
    for the message when it holds no graph)."""
    from thundervis.recording import UnknownItem
    if not graphs:
        raise UnknownItem(f"{where} holds no compiled graph")
    if graph is None:
        g = default_graph(graphs, chain)
    else:
        g = next((x for x in graphs if x.id == int(graph)), None)
        if g is None:
            ids = ", ".join(str(x.id) for x in graphs)
            raise UnknownItem(f"no graph {graph} in this recording (graphs: {ids})")
    kind = chain or default_chain(g)
    if kind is None:
        raise UnknownItem(f"graph {g.id} has no recorded chain")
    return g, g.chain(kind)


def pick_pass(graphs: Sequence, graph: Optional[int] = None, chain: Optional[str] = None,
              pass_: Union[int, str, None] = None, where: str = "the recording"):
    """Return ``(Graph, Chain, PassInfo)``: :func:`pick_chain`, then ``pass_`` (an index or a name;
    None: the last pass); raise ``recording.UnknownItem`` naming the valid choices."""
    from thundervis.recording import UnknownItem
    g, c = pick_chain(graphs, graph, chain, where)
    if not c.passes:
        raise UnknownItem(f"graph {g.id} {c.kind} has no recorded pass")
    return g, c, (c.find_pass(pass_) if pass_ is not None else c.passes[-1])


def default_view(graphs: Sequence, graph=None, chain=None, pass_=None, compare=None) -> Optional[DefaultView]:
    """Return the :class:`DefaultView` for the selection asked for (each part None: the default),
    or None when there is no graph; raise ``recording.UnknownItem`` naming the valid choices."""
    if not graphs:
        return None
    g, c = pick_chain(graphs, graph, chain)
    if not c.passes:
        return DefaultView(g.id, c.kind, 0, -1, has_pass=False)
    p = c.find_pass(pass_) if pass_ is not None else c.passes[-1]
    cmp_ = c.find_pass(compare).index if compare is not None else -1
    return DefaultView(g.id, c.kind, p.index, cmp_)


def chain_on_switch(graph, kind: Optional[str]) -> Optional[str]:
    """Return the chain a view opens when the user switches to ``graph`` (a ``recording.model.Graph``)
    from a chain of ``kind``: the same kind when the graph has it, else its :func:`default_chain`
    (the TUI's next graph, the widget's graph menu)."""
    if kind is not None and any(c.kind == kind for c in graph.chains):
        return kind
    return default_chain(graph)


def kept_view(graphs: Sequence, graph: Optional[int] = None, chain: Optional[str] = None,
              pass_index: Optional[int] = None, compare_index: Optional[int] = -1) -> Optional[DefaultView]:
    """Return the view among ``graphs`` closest to the one shown (the recording grew, or another
    recording of the same program is shown, e.g. another rank): the same graph, chain and passes
    where they exist, else that chain's last pass, else the default view of that graph, else the
    default view (None: no graph). Any part None: not chosen yet, the default."""
    g = next((x for x in graphs if x.id == graph), None)
    c = next((x for x in g.chains if x.kind == chain), None) if g is not None else None
    if c is None:
        return default_view(graphs, graph if g is not None else None)
    indexes = [p.index for p in c.passes]
    if not indexes:
        return DefaultView(g.id, chain, 0, -1, has_pass=False)
    p = pass_index if pass_index in indexes else indexes[-1]
    return DefaultView(g.id, chain, p, compare_index if compare_index in indexes and compare_index != p else -1)


def diagram_pass(chain) -> Optional[int]:
    """Return the index of the pass whose trace ``chain``'s fusion diagram draws (a
    ``recording.model.Chain``): its last pass, the one that runs; None when it holds no pass."""
    return chain.passes[-1].index if chain.passes else None


def live_view(graphs: Sequence, graph: Optional[int], chain: Optional[str], pass_index: Optional[int],
              before) -> Optional[int]:
    """Return the pass index to show once a live recording grew: ``graphs`` as recorded now, the
    view on ``graph``'s ``chain`` at ``pass_index``, ``before`` that chain as it was (a
    ``recording.model.Chain``; None: not shown yet). A view on its last pass follows the run to the
    chain's new last pass; any other view stays where the user put it (``pass_index``, which
    :func:`kept_view` then keeps or replaces when it is gone)."""
    if before is None or not before.passes or pass_index != before.passes[-1].index:
        return pass_index
    g = next((x for x in graphs if x.id == graph), None)
    c = next((x for x in g.chains if x.kind == chain), None) if g is not None else None
    return c.passes[-1].index if c is not None and c.passes else pass_index


def search_target(graphs: Sequence, graph: int, chain: str, pass_index: Optional[int] = None) -> Optional[DefaultView]:
    """Return where a search or source hit in ``graph``'s ``chain`` opens: the pass the hit was
    found in (``pass_index``, a symbol or source line of the pass shown), else when that is None or
    not recorded the chain's last pass (a source line's ops, as they run); always its trace, never a
    comparison. None when that chain is not among ``graphs`` or holds no pass."""
    g = next((x for x in graphs if x.id == graph), None)
    c = next((x for x in g.chains if x.kind == chain), None) if g is not None else None
    if c is None or not c.passes:
        return None
    indexes = [p.index for p in c.passes]
    return DefaultView(g.id, c.kind, pass_index if pass_index in indexes else indexes[-1], -1)
