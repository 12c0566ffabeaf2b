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
