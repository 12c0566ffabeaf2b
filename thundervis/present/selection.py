"""The user's choice of graph, chain, pass (and pass to compare with), resolved once in present's
terms: what ``show``, ``dot``, ``diff`` (``--graph``/``--chain``/``--pass``/``--from``/``--to``),
the widget's ``graph=``/``chain=`` and the rank given with ``--rank`` resolve to. Missing parts take
the default view's values (:mod:`.default_view`); anything that names no recorded graph, chain or
pass is one :class:`~.errors.DataError` sentence naming the valid choices.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

from .default_view import pick_chain
from .errors import DataError

Choice = Union[int, str, None]  # a pass by index (or its digits) or by name; None: the default


@dataclass(frozen=True)
class Selection:
    """A resolved choice: the ``recording.model`` ``Graph``, ``Chain`` and ``PassInfo`` shown, and
    ``before``, the pass it is compared with (None: no comparison)."""

    graph: object
    chain: object
    pass_: object
    before: object = None

    @property
    def ref(self):
        """The shown pass's ``recording.PassRef``."""
        return self.pass_.ref

    def as_json(self) -> dict:
        """Return ``{"graph", "chain", "pass_index", "pass_name", "before_index"}`` (the last None
        without a comparison)."""
        return {"graph": self.graph.id, "chain": self.chain.kind, "pass_index": self.pass_.index,
                "pass_name": self.pass_.name, "before_index": self.before.index if self.before is not None else None}


def _chain(graphs: Sequence, graph: Choice, chain: Optional[str], where: str):
    from thundervis.recording import UnknownItem
    try:
        g, c = pick_chain(graphs, None if graph is None else _graph_id(graph), chain, where)
    except UnknownItem as e:
        raise DataError(_sentence(e)) from None
    if not c.passes:
        raise DataError(f"graph {g.id} {c.kind} has no recorded pass.")
    return g, c


def _graph_id(graph) -> int:
    if isinstance(graph, bool) or not isinstance(graph, (int, str)) or not str(graph).strip().lstrip("-").isdigit():
        raise DataError(f"a graph is named by its number, not {graph!r}.")
    return int(graph)


def _pass(c, which: Choice):
    from thundervis.recording import UnknownItem
    try:
        return c.find_pass(which)
    except UnknownItem as e:
        raise DataError(_sentence(e)) from None


def _sentence(e) -> str:
    return str(e).rstrip(".") + "."


def select(graphs: Sequence, graph: Choice = None, chain: Optional[str] = None, pass_: Choice = None,
           where: str = "the recording") -> Selection:
    """Return the :class:`Selection` of ``pass_`` (default: the last) of ``chain`` of ``graph``
    among ``graphs`` (the recording's ``Graph`` s; defaults: the default view's); DataError naming
    the valid choices (``where``: the recording's name when it holds no graph)."""
    g, c = _chain(graphs, graph, chain, where)
    return Selection(g, c, c.passes[-1] if pass_ is None else _pass(c, pass_))


def select_pair(graphs: Sequence, graph: Choice = None, chain: Optional[str] = None, from_: Choice = None,
                to: Choice = None, where: str = "the recording") -> Selection:
    """Return the :class:`Selection` of a pass diff: ``to`` (default: the last pass) compared with
    ``from_`` (default: the pass before ``to``, or ``to`` itself when it is the first); DataError
    naming the valid choices."""
    g, c = _chain(graphs, graph, chain, where)
    after = c.passes[-1] if to is None else _pass(c, to)
    if from_ is not None:
        before = _pass(c, from_)
    else:
        earlier = [p for p in c.passes if p.index < after.index]
        before = earlier[-1] if earlier else after
    return Selection(g, c, after, before)
