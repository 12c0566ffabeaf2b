"""The graph entry of the compile cache (compiler/graph_cache.py, graph_hit.py): a warm compile of a
plain training graph skips AOTAutograd, records what a cold compile does (every backend pass marked
from cache, the same ledger) and trains the same, bit for bit; a graph that is not plain, or a
tampered entry, compiles through AOTAutograd; a chain whose cached code fails at its first call
runs through the torch executor."""
from __future__ import annotations

import glob
import gzip
import json
import os

import pytest
import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler import graph_cache, graph_hit
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


class Mlp(torch.nn.Module):
    def __init__(self, norm: str = "layer"):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
        self.norm = torch.nn.LayerNorm(32) if norm == "layer" else torch.nn.BatchNorm1d(32)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        logits = self.b(self.norm(h))
        return logits.view(-1), logits.argmax(-1)  # a view output and one that needs no grad


def _run(norm: str = "layer", steps: int = 2, failures_ok: bool = False):
    """Compile Mlp, train ``steps`` steps; return (observer, outputs, grads)."""
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model = Mlp(norm)
    obs = Seen()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs, cache=True))
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    outs = []
    for _ in range(steps):
        model.zero_grad()
        flat, best = compiled(x)
        assert not best.requires_grad and flat.requires_grad
        flat.square().sum().backward()
        outs += [flat.detach(), best]
    torch._dynamo.reset()
    assert failures_ok or not obs.failures, obs.failures
    return obs, outs, [p.grad.clone() for p in model.parameters()]


def _graph_entries(root) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "compile", "*", "*.graph.json.gz")))


def _graph_events(obs) -> list[dict]:
    return [d for _, e, d in obs.events if e == "compile_cache" and d.get("level") == "graph"]


def _backend_passes(obs) -> list:
    return [(c, i, n, ch, shift_seq(t, -seq_base(t))) for c, i, n, ch, t in obs.passes
            if n in ("acquire", "remat") and c != "dynamo"]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))
    return tmp_path


def _same(cold, warm, exact: bool = True) -> None:
    for a, b in zip(cold[1] + cold[2], warm[1] + warm[2]):
        torch.testing.assert_close(b, a, **({"rtol": 0, "atol": 0} if exact else {}))


def test_a_warm_graph_skips_aot_autograd_and_records_and_trains_as_a_cold_one(cache_dir, monkeypatch):
    cold = _run()
    assert len(_graph_entries(cache_dir)) == 1
    assert _graph_events(cold[0]) == [{"hit": False, "key": _graph_events(cold[0])[0]["key"], "level": "graph"}] \
        or _graph_events(cold[0]) == []  # no entry yet: a miss without a note

    from thundervis.compiler import backend

    def no_aot(*a, **k):
        raise AssertionError("a graph entry hit must not call AOTAutograd")
    monkeypatch.setattr(backend, "aot_module_simplified", no_aot)
    warm = _run()
    _same(cold, warm)
    (hit,) = _graph_events(warm[0])
    assert hit["hit"] is True
    c, w = _backend_passes(cold[0]), _backend_passes(warm[0])
    assert [p[:4] for p in w] == [p[:4] for p in c] and len(c) == 5  # joint, and acquire + remat per chain
    for pc_, pw in zip(c, w):
        assert (pw[4].inputs, pw[4].symbols, pw[4].outputs) == (pc_[4].inputs, pc_[4].symbols, pc_[4].outputs)
        assert pw[4].meta.get("from_cache") is True and not pc_[4].meta.get("from_cache")
    assert warm[0].ledgers == cold[0].ledgers and len(cold[0].ledgers) == 1
    parts = [d for _, e, d in warm[0].events if e == "partition_cache"]
    assert parts == [{"hit": True, "level": "graph"}]
    compiled = [c for c, e, _ in warm[0].events if e == "chain_compiled"]
    assert compiled == ["forward", "backward"]


def test_a_graph_that_mutates_a_buffer_has_no_entry_and_trains_the_same(cache_dir):
    cold = _run("batch")  # BatchNorm updates its running stats in place: not a plain graph
    (marker,) = _graph_entries(cache_dir)  # a marker saying so, no passes
    with gzip.open(marker, "rb") as f:
        assert json.loads(f.read())["not_plain"] == "mutates an input"
    written = os.path.getmtime(marker)
    os.utime(marker, (written - 100, written - 100))
    warm = _run("batch")
    _same(cold, warm)
    assert _graph_events(warm[0]) == []  # nothing to miss: the graph compiles through AOTAutograd
    assert os.path.getmtime(marker) < written  # read as it is, not written again
    chain_hits = [d for _, e, d in warm[0].events if e == "compile_cache" and d.get("level") != "graph"]
    assert chain_hits and all(d["hit"] for d in chain_hits)  # its chains still hit their own entries
    parts = [d for _, e, d in warm[0].events if e == "partition_cache"]
    assert parts and all(d["hit"] for d in parts)


def _tamper(root, change) -> None:
    (path,) = _graph_entries(root)
    with gzip.open(path, "rb") as f:
        doc = json.loads(f.read())
    change(doc)
    with gzip.open(path, "wb") as f:
        f.write(json.dumps(doc).encode())


def _call_outside_allow_list(doc):
    doc["passes"][2]["trace"]["symbols"][0]["sym"] = "os.system"


def _more_saved(doc):
    doc["meta"]["n_saved"] += 1


def _wrong_order(doc):
    doc["passes"][1], doc["passes"][2] = doc["passes"][2], doc["passes"][1]


def _ledger_object(doc):
    doc["ledger"] = {"x": {"__class__": [1, {"y": [[[[[[[[[[1]]]]]]]]]]}]}}


@pytest.mark.parametrize("change", [_call_outside_allow_list, _more_saved, _wrong_order, _ledger_object])
def test_a_tampered_graph_entry_is_refused_and_the_graph_compiled_again(cache_dir, change):
    cold = _run()
    _tamper(cache_dir, change)
    warm = _run()
    _same(cold, warm)
    (miss,) = _graph_events(warm[0])
    assert miss["hit"] is False and "refused" in miss["note"], miss
    again = _run()
    assert _graph_events(again[0])[0]["hit"] is True  # the recompile wrote a good entry back


def test_garbage_is_a_miss(cache_dir):
    _run()
    with open(_graph_entries(cache_dir)[0], "wb") as f:
        f.write(b"not gzip")
    (miss,) = _graph_events(_run()[0])
    assert miss["hit"] is False and "unreadable" in miss["note"]


def test_cached_code_that_fails_at_its_first_call_runs_through_torch(cache_dir, monkeypatch):
    cold = _run()
    real = graph_hit.compile_chain

    def failing(trace, options, *a, **k):
        final, fn = real(trace, options, *a, **k)
        if options.cache is None:  # the torch executor's fallback compile
            return final, fn

        def broken(args):
            raise RuntimeError("kernel launch failed")
        broken._boxed_call = True
        return final, broken
    monkeypatch.setattr(graph_hit, "compile_chain", failing)
    warm = _run(failures_ok=True)
    _same(cold, warm, exact=False)  # torch's unfused ops round differently from the fused kernels
    assert len(warm[0].failures) == 2 and all("kernel launch failed" in f for f in warm[0].failures)


def test_the_key_follows_shapes_grad_flags_and_source_files(tmp_path):
    seen = []

    def keep(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward
    torch._dynamo.reset()
    f = torch.compile(lambda x, w: (x @ w).relu(), backend=keep)
    f(torch.randn(4, 8), torch.randn(8, 3, requires_grad=True))
    torch._dynamo.reset()
    gm, ex = seen[0]

    def key(inputs, **kw):
        return graph_cache.graph_key(gm, inputs, executors=None, remat="auto", debug=False, **kw)
    base = key(ex)
    assert base and key(ex) == base
    assert key([ex[0], ex[1].detach()]) not in (None, base)  # nothing requires grad: an inference graph
    assert key([torch.randn(4, 9), ex[1]]) != base
    assert key([ex[0].double(), ex[1]]) != base
    assert graph_cache.graph_key(gm, ex, executors=None, remat="off", debug=False) != base
    src = tmp_path / "train.py"
    src.write_text("x = 1\n")

    class Site:
        file = str(src)
    k1 = key(ex, site=Site())
    src.write_text("x = 22\n")
    assert key(ex, site=Site()) != k1  # an edited source file: its lines are recorded, so a miss
    k2, before = key(ex, site=Site()), os.stat(src)
    src.write_text("x = 33\n")  # the same size, and the mtime put back: only the content tells
    os.utime(src, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert key(ex, site=Site()) != k2
    k3 = key(ex, site=Site())
    os.utime(src, (os.path.getmtime(src) + 50, os.path.getmtime(src) + 50))
    assert key(ex, site=Site()) == k3  # touched, not edited: still a hit


def _infer(monkeypatch=None):
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model, obs = Mlp(), Seen()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs, cache=True))
    with torch.no_grad():
        out = compiled(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)))
    torch._dynamo.reset()
    assert not obs.failures, obs.failures
    return obs, list(out)


def test_an_inference_graph_is_kept_too(cache_dir, monkeypatch):
    cold = _infer()
    assert len(_graph_entries(cache_dir)) == 1
    from thundervis.compiler import backend

    def no_aot(*a, **k):
        raise AssertionError("a graph entry hit must not call AOTAutograd")
    monkeypatch.setattr(backend, "aot_module_simplified", no_aot)
    warm = _infer()
    for a, b in zip(cold[1], warm[1]):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    (hit,) = _graph_events(warm[0])
    assert hit["hit"] is True
    c = [(ch, i, n) for ch, i, n, _, _ in cold[0].passes if ch == "inference"]
    w = [(ch, i, n) for ch, i, n, _, t in warm[0].passes if ch == "inference" and t.meta.get("from_cache")]
    assert w == c and c[0] == ("inference", 0, "acquire")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_models_we_did_not_write_train_the_same_from_their_graph_entries(cache_dir, name):
    """Hugging Face models (random init), two AdamW steps: the warm run takes every graph from its
    entry (GPT-2 has a graph break, so two graphs) and its losses and gradients equal the cold run's."""
    pytest.importorskip("transformers")
    import sys
    bench = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
    sys.path.insert(0, bench)
    try:
        from _memory_models import build
    finally:
        sys.path.remove(bench)

    def train():
        torch._dynamo.reset()
        reset_graph_ids()
        model, batch = build(name, hidden=64, layers=2, batch=2, seq=16)
        obs = Seen()
        run = torch.compile(model, backend=ThundervisCompiler(observer=obs, cache=True))
        opt = torch.optim.AdamW(model.parameters())
        losses = []
        for _ in range(2):
            loss = run(**batch).loss
            loss.backward()
            losses.append(loss.detach())
            grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            opt.step()
            opt.zero_grad()
        torch._dynamo.reset()
        assert not obs.failures, obs.failures
        return obs, losses + grads
    cold, warm = train(), train()
    for a, b in zip(cold[1], warm[1]):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    hits = _graph_events(warm[0])
    assert hits and all(h["hit"] for h in hits), hits


@pytest.mark.slow
def test_the_readme_main_job_twice_with_the_cache_on_as_users_run_it(tmp_path):
    """The suite runs with the cache off (conftest); users get it on. The README's main job, twice,
    in fresh processes sharing a cache folder: the second run trains the same losses, compiles from
    the cache, and its recording holds every pass of every chain, as the first one's does."""
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "THUNDERVIS_COMPILE_CACHE"}
    env["THUNDERVIS_CACHE_DIR"] = str(tmp_path / "cache")

    def run(name):
        rec = str(tmp_path / f"{name}.tvrec")
        done = subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "-o", rec,
                               os.path.join(repo, "examples", "train_gpt.py"), "--steps", "3"],
                              env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr[-2000:]
        shown = subprocess.run([sys.executable, "-m", "thundervis", "ls", "--json", rec],
                               env=env, capture_output=True, text=True, timeout=300)
        losses = [ln for ln in done.stdout.splitlines() if ln.startswith("step ")]
        return losses, json.loads(shown.stdout)

    def passes(doc):
        return [(g["id"], c["kind"], p["index"], p["name"], p["n_symbols"])
                for g in doc["graphs"] for c in g["chains"] for p in c["passes"]]
    cold_losses, cold = run("cold")
    warm_losses, warm = run("warm")
    assert cold_losses and warm_losses == cold_losses
    assert "from cache" not in cold["compile_text"] and warm["compile_text"].endswith("from cache")
    assert passes(warm) == passes(cold) and len(passes(cold)) >= 22  # dynamo, joint, 10 + 10 chain passes
    assert [f["label"] for g in warm["graphs"] for f in g["fusions"]] == \
        [f["label"] for g in cold["graphs"] for f in g["fusions"]]
