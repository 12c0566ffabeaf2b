"""Loading the traces of one chain with a ``shared`` memo (what the compile cache does): the same
traces as loading each alone, with equal symbols and proxies made one object, and no sharing where
a proxy a symbol names differs."""
from __future__ import annotations

import json

import pytest

from thundervis.compiler.serialize import TraceFormatError, trace_from_dict, trace_to_dict


@pytest.fixture(scope="module")
def chain(mlp_run) -> list:
    """The forward chain's passes, as dicts."""
    return [trace_to_dict(t) for t in mlp_run.recorder.traces("forward").values()]


def test_shared_loading_gives_the_same_traces_with_shared_symbols(chain):
    shared: dict = {}
    loaded = [trace_from_dict(d, shared=shared) for d in chain]
    alone = [trace_from_dict(d) for d in chain]
    assert loaded == alone
    reused = sum(1 for a, b in zip(loaded, loaded[1:]) for s in b.symbols if any(s is t for t in a.symbols))
    assert reused > 0  # later passes keep most symbols of earlier ones: those are one object


def test_a_symbol_is_not_shared_when_a_proxy_it_names_differs(chain):
    first = chain[0]
    name = first["inputs"][0]
    changed = json.loads(json.dumps(first))
    for p in changed["proxies"]:
        if p["name"] == name:
            p["shape"] = [d + 1 for d in p["shape"]]
    shared: dict = {}
    a = trace_from_dict(first, shared=shared)
    b = trace_from_dict(changed, shared=shared)
    assert b == trace_from_dict(changed)
    users = [i for i, s in enumerate(a.symbols) if any(p.name == name for p in s.flat_inputs())]
    assert users
    for i in users:
        assert b.symbols[i] is not a.symbols[i]
        assert [p for p in b.symbols[i].flat_inputs() if p.name == name][0] == b.inputs[0]
    assert any(b.symbols[i] is a.symbols[i] for i in range(len(a.symbols)) if i not in users)


def test_a_tampered_symbol_is_refused_after_its_good_twin_was_loaded(chain):
    first = chain[0]
    bad = json.loads(json.dumps(first))
    bad["symbols"][0]["sym"] = "os.system; x"
    shared: dict = {}
    trace_from_dict(first, shared=shared)
    with pytest.raises(TraceFormatError):
        trace_from_dict(bad, shared=shared)
