"""present.selection: the user's graph/chain/pass choice resolved once, defaults from the default
view, every bad choice one sentence naming the valid ones."""
from __future__ import annotations

import pytest

from thundervis.present.default_view import default_view
from thundervis.present.errors import DataError
from thundervis.present.selection import select, select_pair
from thundervis.recording import open_recording


def test_defaults_are_the_default_views(recorded):
    path, _ = recorded
    with open_recording(path) as rec:
        graphs = rec.graphs()
    s, dv = select(graphs), default_view(graphs)
    assert (s.graph.id, s.chain.kind, s.pass_.index) == (dv.graph, dv.chain, dv.pass_index)
    assert s.as_json()["before_index"] is None and s.ref == s.chain.passes[-1].ref
    assert select(graphs, None, "backward", "cse").pass_.name == "cse"
    assert select(graphs, "0", "forward", "1").pass_.index == 1  # digits as typed on a command line
    pair = select_pair(graphs, None, "forward", None, "dce")
    assert pair.before.index == pair.pass_.index - 1
    first = select_pair(graphs, None, "forward", None, 0)
    assert first.before == first.pass_  # the first pass has no pass before it: compared with itself


@pytest.mark.parametrize("args, words", [
    ((7,), "graphs: 0"), ((None, "nope"), "nope"), ((None, "forward", "nope"), "passes: 0 "),
    (("x",), "by its number"), ((True,), "by its number")])
def test_bad_choices_are_one_sentence(recorded, args, words):
    path, _ = recorded
    with open_recording(path) as rec:
        graphs = rec.graphs()
    with pytest.raises(DataError) as e:
        select(graphs, *args)
    assert words in str(e.value) and str(e.value).endswith(".") and "\n" not in str(e.value)
