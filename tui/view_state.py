"""What the TUI shows, as one value: :class:`ViewState` (frozen, slotted), held in one reactive on
the app and replaced whole on every change. The app's watcher compares the old and new values and
repaints only what changed; workers are handed the state they compute for, and a result whose
:func:`content_key` no longer matches the current state is dropped."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True, slots=True)
class ViewState:
    """The view: which rank, graph, chain and pass; the diff settings; the selected line."""

    rank: Optional[int] = None  # the rank of a group shown (None: a single recording)
    graph: Optional[int] = None
    chain: Optional[str] = None
    index: Optional[int] = None  # the pass shown
    diff_from: Optional[int] = None  # None: no diff; -1: the previous pass shown; else that pass
    side_by_side: bool = False
    folded: bool = True  # unchanged diff lines folded to a few around each change
    hide_unchanged: bool = False  # the stepper hides passes that changed nothing
    signature_folded: bool = True  # the def + inputs block shows as one line until opened
    opened_folds: frozenset = frozenset()  # keys of the layer folds opened (present.trace_folds)
    opened_diff_folds: frozenset = frozenset()  # keys of a diff's layer folds opened (thundervis.diff.layer_folds)
    details_hidden: bool = False
    selected_uid: Optional[str] = None


def visible_passes(state: ViewState, chain) -> list:
    """Return the passes of ``chain`` (a ``Chain`` or None) the stepper shows for ``state``
    (unchanged ones hidden when asked; the first pass and the current one always stay)."""
    if chain is None:
        return []
    if not state.hide_unchanged:
        return list(chain.passes)
    return [p for p in chain.passes if p.changed or p.index == state.index or p is chain.passes[0]]


def diff_base(state: ViewState, chain, index: Optional[int] = None) -> Optional[int]:
    """Return the pass the diff of pass ``index`` (default the state's) compares against: the
    chosen one, else the previous visible pass of ``chain``; None when no diff is shown."""
    index = state.index if index is None else index
    if state.diff_from is None or index is None:
        return None
    if state.diff_from >= 0:
        return state.diff_from
    earlier = [p.index for p in visible_passes(state, chain) if p.index < index]
    return earlier[-1] if earlier else None


def content_key(state: ViewState, chain) -> tuple:
    """Return what the middle view's content depends on (two states with the same key show the
    same lines): rank, graph, chain, pass, diff base, side by side, folded, and with a diff the
    layer folds opened in it."""
    base = diff_base(state, chain)
    return (state.rank, state.graph, state.chain, state.index, base, state.side_by_side, state.folded,
            state.opened_diff_folds if base is not None else None)


def keeps_cursor(old: ViewState, new: ViewState) -> bool:
    """Return whether going from ``old`` to ``new`` keeps the trace cursor where it is: stepping,
    switching rank, side by side; not a new chain, diff on or off, or refolding."""
    if old.rank != new.rank:
        return True
    if (old.graph, old.chain) != (new.graph, new.chain) or old.folded != new.folded:
        return False
    return old.diff_from == new.diff_from or old.side_by_side != new.side_by_side


def settle(state: ViewState, overview) -> ViewState:
    """Return ``state`` made valid for ``overview`` (a ``ViewOverview``) by present's one rule
    (``present.default_view.kept_view``: the same graph, chain and passes where they still exist,
    else the chain's last pass, else the default view); a diff stays on, against the pass kept or
    the previous one."""
    from dataclasses import replace
    from thundervis.present.default_view import kept_view
    chosen = state.diff_from is not None and state.diff_from >= 0
    dv = kept_view(overview.graphs, state.graph, state.chain, state.index, state.diff_from if chosen else -1)
    if dv is None:
        return replace(state, graph=None, chain=None, index=None)
    diff_from = (dv.compare_index if dv.compare_index >= 0 else -1) if chosen else state.diff_from
    return replace(state, graph=dv.graph, chain=dv.chain, index=dv.pass_index if dv.has_pass else None,
                   diff_from=diff_from)
