"""The partition cache (compiler/partition_cache.py): a warm compile hands min-cut the recorded choice
(saved values, CSE merges) instead of its search, and records exactly what a cold compile does (the
acquire and remat passes, both policies' ledger decisions); a tampered entry is a miss with a note."""
from __future__ import annotations

import glob
import json
import os

import pytest
import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler import partition_cache as pc
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.compile_cache import seq_base, shift_seq


class Seen(CompileObserver):
    def __init__(self):
        self.passes, self.events, self.ledgers, self.failures = [], [], [], []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.passes.append((chain, index, name, changed, trace))

    def runtime(self, graph, chain, event, data):
        self.events.append((chain, event, data))

    def memory_ledger(self, graph, data):
        self.ledgers.append(data)

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append(error)


class Twice(torch.nn.Module):
    """A GELU MLP that computes one sine twice: CSE merges the copies, min-cut recomputes the GELU."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.norm = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4), torch.nn.LayerNorm(32)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        h = torch.sin(h) + 2 * torch.sin(h)
        return self.b(self.norm(h))


def _run():
    """Compile Twice with the cache on, run forward + backward once; return (observer, out, grads)."""
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model = Twice()
    obs = Seen()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs, cache=True))
    out = compiled(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)))
    out.square().sum().backward()
    torch._dynamo.reset()
    assert not obs.failures, obs.failures
    return obs, out.detach(), [p.grad.clone() for p in model.parameters()]


def _parts(root) -> list[str]:
    return glob.glob(os.path.join(root, "compile", "*", "*.part.json"))


def _events(obs) -> list[dict]:
    return [d for _, e, d in obs.events if e == "partition_cache"]


def _backend_passes(obs) -> list:
    """The passes the backend records itself (acquire of every chain, remat), seq_nr made relative."""
    return [(c, i, n, ch, shift_seq(t, -seq_base(t))) for c, i, n, ch, t in obs.passes if n in ("acquire", "remat")]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))
    # A graph entry (graph_cache) would skip the partition on a warm compile; the partition cache
    # is what a graph without one uses (not plain, or a key that changed): test it alone.
    from thundervis.compiler import graph_cache
    monkeypatch.setattr(graph_cache, "graph_key", lambda *a, **k: None)
    return tmp_path


@pytest.fixture
def cold(cache_dir):
    return _run()


def _same_as_cold(cold, warm) -> None:
    (obs_c, out_c, grads_c), (obs_w, out_w, grads_w) = cold, warm
    torch.testing.assert_close(out_w, out_c, rtol=0, atol=0)
    for a, b in zip(grads_w, grads_c):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    c, w = _backend_passes(obs_c), _backend_passes(obs_w)
    assert [p[:4] for p in w] == [p[:4] for p in c]
    for pc_, pw in zip(c, w):
        assert (pw[4].inputs, pw[4].symbols, pw[4].outputs) == (pc_[4].inputs, pc_[4].symbols, pc_[4].outputs), pc_[:3]
        drop = ("duration_ms", "from_cache")
        assert {k: v for k, v in pw[4].meta.items() if k not in drop} == \
               {k: v for k, v in pc_[4].meta.items() if k not in drop}
    assert obs_w.ledgers == obs_c.ledgers  # both policies' decisions and reasons, byte for byte


def test_a_warm_partition_takes_the_recorded_choice_and_records_what_a_cold_one_does(cold, cache_dir):
    obs_c = cold[0]
    assert _events(obs_c) == [{"hit": False, "key": _events(obs_c)[0]["key"]}]
    (path,) = _parts(cache_dir)
    entry = json.loads(open(path).read())
    auto = entry["policies"]["auto"]
    assert auto["cse"], "the sine computed twice is merged by min-cut's CSE"
    assert len(auto["saved"]) < len(entry["policies"]["off"]["saved"])  # min-cut recomputes something
    warm = _run()
    assert _events(warm[0]) == [{"hit": True, "key": _events(obs_c)[0]["key"]}]
    _same_as_cold(cold, warm)
    remat = [t for c, i, n, ch, t in warm[0].passes if n == "remat"]
    assert len(remat) == 2 and all(t.meta.get("from_cache") is True for t in remat)
    assert not any(t.meta.get("from_cache") for c, i, n, ch, t in cold[0].passes if n == "remat")
    assert not any(t.meta.get("from_cache") for c, i, n, ch, t in warm[0].passes if n == "acquire")
    assert [d for _, e, d in warm[0].events if e == "compile_cache" and d["hit"]], "the passes hit too"


def _tamper(cache_dir, change) -> None:
    (path,) = _parts(cache_dir)
    doc = json.loads(open(path).read())
    change(doc["policies"])
    with open(path, "w") as f:
        json.dump(doc, f)


@pytest.mark.parametrize("what,change,said", [
    ("a name of no node", lambda p: p["auto"]["saved"].__setitem__(0, "no_such_node"), "not a node"),
    pytest.param("a duplicate", lambda p: p["auto"]["saved"].append(p["auto"]["saved"][0]), "twice", marks=pytest.mark.slow),
    pytest.param("a wrong type", lambda p: p["auto"].__setitem__("saved", "mm"), "not a list", marks=pytest.mark.slow),
    pytest.param("a number for a name", lambda p: p["auto"]["saved"].__setitem__(0, 7), "not a node name", marks=pytest.mark.slow),
    ("a huge list", lambda p: p["auto"].__setitem__("saved", [f"n{i}" for i in range(200_000)]), "at most"),
    pytest.param("markup for a name", lambda p: p["auto"]["saved"].__setitem__(0, "[red]x"), "not a node name", marks=pytest.mark.slow),
    pytest.param("markup for a kept node", lambda p: p["auto"]["cse"][0].__setitem__(1, "[red]x"), "pair of names", marks=pytest.mark.slow),
    pytest.param("a bool for the output count", lambda p: p["auto"].__setitem__("n_fwd", True), "count", marks=pytest.mark.slow),
    pytest.param("another choice", lambda p: p["auto"]["saved"].pop(), "other", marks=pytest.mark.slow),
    ("a wrong digest", lambda p: p["auto"].__setitem__("digest", "0" * 32), "other graphs"),
    pytest.param("no digest", lambda p: p["auto"].pop("digest"), "digest", marks=pytest.mark.slow),
    pytest.param("a merge of different ops", lambda p: p["auto"]["cse"][0].__setitem__(1, p["auto"]["saved"][0]), "CSE merge", marks=pytest.mark.slow),
    pytest.param("the off choice changed", lambda p: p["off"]["saved"].pop(), "off partition differs", marks=pytest.mark.slow),
    pytest.param("no policies", lambda p: p.clear(), "not an object", marks=pytest.mark.slow),
])
def test_a_tampered_entry_is_a_miss_with_a_note(cold, cache_dir, what, change, said):
    _tamper(cache_dir, change)
    warm = _run()
    (event,) = _events(warm[0])
    assert event["hit"] is False and "refused" in event["note"] and said in event["note"], (what, event)
    _same_as_cold(cold, warm)
    assert not any(t.meta.get("from_cache") for c, i, n, ch, t in warm[0].passes if n == "remat")
    # the miss partitioned again and wrote a good entry back
    assert _events(_run()[0])[0]["hit"] is True


def test_garbage_entries_are_misses(cold, cache_dir):
    (path,) = _parts(cache_dir)
    for junk in (b"\x00not json", b"[]", json.dumps({"format": 1, "key": "0" * 64, "policies": {}}).encode()):
        with open(path, "wb") as f:
            f.write(junk)
        (event,) = _events(_run()[0])
        assert event["hit"] is False and "refused" in event["note"], event


def test_no_cache_neither_reads_nor_writes_partitions(cache_dir):
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Seen()
    f = torch.compile(Twice(), backend=ThundervisCompiler(observer=obs, cache=False))
    f(torch.randn(8, 16)).sum().backward()
    torch._dynamo.reset()
    assert _parts(cache_dir) == [] and _events(obs) == []


def _graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.sin.default, (x,))
    b = g.call_function(torch.ops.aten.sin.default, (x,))
    c = g.call_function(torch.ops.aten.cos.default, (x,))
    r1 = g.call_function(torch.ops.aten.rand_like.default, (x,))
    r2 = g.call_function(torch.ops.aten.rand_like.default, (x,))
    s = g.call_function(torch.ops.aten.add.Tensor, (b, c))
    t = g.call_function(torch.ops.aten.add.Tensor, (r1, r2))
    g.output((s, t))
    return g, (a, b, c, r1, r2, s)


def test_merges_are_replayed_only_between_identical_deterministic_nodes():
    g, (a, b, c, r1, r2, s) = _graph()
    before = list(g.nodes)
    for bad in ([[c.name, a.name]], [[a.name, b.name]], [[r2.name, r1.name]], [[b.name, "nope"]],
                [[b.name, a.name], [b.name, a.name]], [[s.name, a.name]]):
        with pytest.raises(pc.Refused):
            pc.apply_merges(g, bad)
        assert list(g.nodes) == before  # refused before changing anything
    assert pc.apply_merges(g, [[b.name, a.name]]) is g
    assert b.name not in {n.name for n in g.nodes} and s.args[0] is a
    # what a CSE that made g from a fresh copy merged, read back from the two graphs
    assert pc.cse_pairs(list(_graph()[0].nodes), g) == [[b.name, a.name]]
    m, (a2, b2, *_rest) = _graph()
    x = next(n for n in m.nodes if n.op == "placeholder")
    with m.inserting_after(a2):
        m.call_function(torch.ops.aten.add_.Tensor, (x, 1.0))  # a mutation between the two sines
    with pytest.raises(pc.Refused, match="keeps apart"):
        pc.apply_merges(m, [[b2.name, a2.name]])
    with pytest.raises(pc.Refused):  # a node gone with no identical one left: not CSE's doing
        pc.cse_pairs(list(_graph()[0].nodes), _without_cos(_graph()[0]))


def _without_cos(g):
    cos = next(n for n in g.nodes if n.target is torch.ops.aten.cos.default)
    cos.replace_all_uses_with(next(n for n in g.nodes if n.op == "placeholder"))
    g.erase_node(cos)
    return g
