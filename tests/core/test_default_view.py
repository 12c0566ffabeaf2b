"""present.default_view's "which pass" rules, on hand-built graphs (the rules are pure: they read
only ids, kinds and pass indexes)."""
from __future__ import annotations

from types import SimpleNamespace as NS

from thundervis.present import default_view as dv


def _chain(kind, indexes):
    return NS(kind=kind, passes=[NS(index=i, name=f"p{i}") for i in indexes])


def _graph(gid, *chains):
    return NS(id=gid, chains=list(chains))


def test_diagram_pass_is_the_last_pass():
    assert dv.diagram_pass(_chain("forward", [0, 1, 4])) == 4
    assert dv.diagram_pass(_chain("backward", [])) is None


def test_live_view_follows_only_a_view_on_the_last_pass():
    grown = [_graph(0, _chain("forward", [0, 1, 2, 3]), _chain("backward", [0]))]
    was = _chain("forward", [0, 1])
    assert dv.live_view(grown, 0, "forward", 1, was) == 3  # was on the last pass: follows
    assert dv.live_view(grown, 0, "forward", 0, was) == 0  # the user stepped back: stays
    assert dv.live_view(grown, 0, "forward", None, None) is None  # nothing shown before
    assert dv.live_view(grown, 0, "forward", 0, _chain("forward", [])) == 0  # no pass before
    assert dv.live_view(grown, 0, "backward", 0, _chain("backward", [0])) == 0  # no new pass
    assert dv.live_view(grown, 0, "inference", 2, _chain("inference", [2])) == 2  # gone: kept_view decides
    assert dv.live_view(grown, 7, "forward", 1, was) == 1


def test_search_target_opens_the_hit_pass_else_the_last_one_without_a_diff():
    graphs = [_graph(0, _chain("forward", [0, 2, 5]), _chain("backward", []))]
    assert dv.search_target(graphs, 0, "forward", 2) == dv.DefaultView(0, "forward", 2, -1)
    assert dv.search_target(graphs, 0, "forward") == dv.DefaultView(0, "forward", 5, -1)  # a line's ops
    assert dv.search_target(graphs, 0, "forward", 4).pass_index == 5  # that pass is gone
    assert dv.search_target(graphs, 0, "backward") is None
    assert dv.search_target(graphs, 1, "forward") is None
    assert dv.search_target(graphs, 0, "inference") is None
