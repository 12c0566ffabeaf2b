"""Moving through a recording, as pure functions from one :class:`ViewState` to the next: the pass
stepper, chains and graphs, diff settings. The app's actions assign what these return."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from thundervis.present.default_view import chain_on_switch, kept_view, live_view

from .folding import SIGNATURE
from .view_state import ViewState, visible_passes


def to_chain(state: ViewState, overview, graph: int, chain: str) -> ViewState:
    """Return the state showing the pass ``chain`` of ``graph`` opens on (present's default view:
    its last pass) (a diff against the previous pass stays on; one against a chosen pass of the
    old chain goes)."""
    if (graph, chain) == (state.graph, state.chain):
        return state
    dv = None
    if overview is not None and overview.chain(graph, chain) is not None:
        dv = kept_view(overview.graphs, graph, chain)  # no pass chosen there yet: the one it opens on
    return replace(state, graph=graph, chain=chain, index=dv.pass_index if dv is not None and dv.has_pass else None,
                   diff_from=None if state.diff_from is None or state.diff_from >= 0 else -1)


def stepped(state: ViewState, chain, delta: int) -> Optional[ViewState]:
    """Return the state on the next (1) or previous (-1) visible pass, None past either end."""
    keys = [p.index for p in visible_passes(state, chain)]
    if state.index not in keys:
        return None
    pos = keys.index(state.index) + delta
    return replace(state, index=keys[pos]) if 0 <= pos < len(keys) else None


def next_chain(state: ViewState, overview, keys: list) -> ViewState:
    """Return the state on the chain after the current one in ``keys`` ((graph, kind) pairs),
    wrapping around."""
    if not keys:
        return state
    i = keys.index((state.graph, state.chain)) if (state.graph, state.chain) in keys else -1
    return to_chain(state, overview, *keys[(i + 1) % len(keys)])


def next_graph(state: ViewState, overview) -> ViewState:
    """Return the state on the next compiled graph, on the chain present's rule opens there
    (:func:`thundervis.present.default_view.chain_on_switch`: the same kind, else its default)."""
    if overview is None or not overview.graphs:
        return state
    ids = [g.id for g in overview.graphs]
    nxt = ids[(ids.index(state.graph) + 1) % len(ids)] if state.graph in ids else ids[0]
    g = next(g for g in overview.graphs if g.id == nxt)
    kind = chain_on_switch(g, state.chain)
    return to_chain(state, overview, nxt, kind) if kind is not None else state


def toggled(state: ViewState, setting: str) -> ViewState:
    """Return ``state`` with one setting flipped: ``diff`` (against the previous pass, or off),
    ``side`` (side by side; turns the diff on), ``fold``, ``unchanged``, ``signature``, ``details``."""
    if setting == "diff":
        return replace(state, diff_from=None if state.diff_from is not None else -1)
    if setting == "side":
        return replace(state, side_by_side=not state.side_by_side,
                       diff_from=-1 if state.diff_from is None else state.diff_from)
    field = {"fold": "folded", "unchanged": "hide_unchanged", "signature": "signature_folded",
             "details": "details_hidden"}[setting]
    return replace(state, **{field: not getattr(state, field)})


def toggled_block(state: ViewState, key: str) -> ViewState:
    """Return ``state`` with the fold ``key`` (``folding.SIGNATURE`` or a layer fold's key)
    opened if it was closed, closed if it was open."""
    if key == SIGNATURE:
        return toggled(state, "signature")
    return replace(state, opened_folds=state.opened_folds ^ {key})


def toggled_diff_fold(state: ViewState, key: str) -> ViewState:
    """Return ``state`` with the diff's layer fold ``key`` opened if it was closed, else closed."""
    return replace(state, opened_diff_folds=state.opened_diff_folds ^ {key})


def opened(state: ViewState, key: str) -> ViewState:
    """Return ``state`` with the fold ``key`` open (a search hit or a jump inside it)."""
    if key == SIGNATURE:
        return replace(state, signature_folded=False)
    return replace(state, opened_folds=state.opened_folds | {key})


def following(state: ViewState, before, overview) -> ViewState:
    """Return the state after a live run recorded more (``before``: the chain as it was, None if
    none): the pass present's :func:`~thundervis.present.default_view.live_view` chooses in
    ``overview``."""
    index = live_view(overview.graphs, state.graph, state.chain, state.index, before)
    return state if index == state.index else replace(state, index=index)
