"""The persistent compile cache: a warm compile replays every pass from the cache (each marked
"from cache") and runs like a cold one; a tampered entry is refused and the chain recompiled; the
size cap evicts the least recently used entries; ``cache=False`` bypasses it."""
from __future__ import annotations

import glob
import gzip
import json
import os

import pytest
import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.compile_cache import CompileCache, cache_root, seq_base, shift_seq
from thundervis.compiler.printer import header_line


class Passes(CompileObserver):
    def __init__(self):
        self.passes, self.events, self.kernels, self.failures = [], [], [], []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.passes.append((graph, chain, index, name, changed, trace))

    def kernels_built(self, graph, chain, kernels):
        self.kernels += [(chain, k.name, k.code) for k in kernels]

    def runtime(self, graph, chain, event, data):
        self.events.append((chain, event, data))

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append(error)


def _run(cache=True):
    """Compile a small model, run forward + backward twice; return (observer, output, grads)."""
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4))
    obs = Passes()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs, cache=cache))
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        model.zero_grad()
        out = compiled(x)
        out.square().sum().backward()
    torch._dynamo.reset()
    assert not obs.failures, obs.failures
    return obs, out.detach(), [p.grad.clone() for p in model.parameters()]


def _entries(root) -> list[str]:
    """The chain entries (a graph entry, ``*.graph.json.gz``, is test_graph_cache's)."""
    return sorted(p for p in glob.glob(os.path.join(root, "compile", "*", "*.json.gz")) if ".graph." not in p)


def _chain_events(obs) -> list:
    """The chains' compile_cache events (the graph entry's has ``level: graph``)."""
    return [d for _, e, d in obs.events if e == "compile_cache" and d.get("level") != "graph"]


def _pipeline(obs):
    """The passes the pipeline reports (acquire and remat come from the backend, never cached)."""
    return [p for p in obs.passes if p[1] in ("forward", "backward") and p[3] not in ("acquire", "remat")]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_warm_compile_replays_every_pass_from_cache_and_runs_the_same(cache_dir):
    assert cache_root() == os.path.join(str(cache_dir), "compile")
    cold, out_cold, grads_cold = _run()
    assert len(_entries(cache_dir)) == 2  # forward and backward
    warm, out_warm, grads_warm = _run()
    torch.testing.assert_close(out_warm, out_cold, rtol=0, atol=0)
    for a, b in zip(grads_warm, grads_cold):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    cold_passes, warm_passes = _pipeline(cold), _pipeline(warm)
    assert [p[:5] for p in warm_passes] == [p[:5] for p in cold_passes]  # every pass, same changed flags
    for (_, _, _, name, _, t_cold), (_, _, _, _, _, t_warm) in zip(cold_passes, warm_passes):
        assert t_warm.meta.get("from_cache") is True, name
        assert "(from cache)" in header_line(t_warm)
        if name != "codegen":  # the same symbols; seq_nr counts on from this compile's autograd counter
            assert (shift_seq(t_warm, seq_base(t_cold) - seq_base(t_warm)).symbols == t_cold.symbols), name
    assert not any(t.meta.get("from_cache") for *_, t in cold_passes)
    assert sorted(warm.kernels) == sorted(cold.kernels)
    hits = _chain_events(warm)
    assert len(hits) == 2 and all(d["hit"] for d in hits)


def test_a_tampered_entry_is_refused_and_the_chain_compiled_again(cache_dir):
    _, out_cold, _ = _run()
    for path in _entries(cache_dir):
        with gzip.open(path, "rb") as f:
            doc = json.loads(f.read())
        last = doc["passes"][-1]["trace"]
        for s in last["symbols"]:  # what codegen would generate code from: a call outside the allow-list
            s["sym"] = "os.system"
            break
        with gzip.open(path, "wb") as f:
            f.write(json.dumps(doc).encode())
    obs, out, _ = _run()
    torch.testing.assert_close(out, out_cold, rtol=0, atol=0)
    events = _chain_events(obs)
    assert len(events) == 2 and not any(d["hit"] for d in events)
    assert all("refused" in d["note"] for d in events), events
    assert not any(t.meta.get("from_cache") for *_, t in _pipeline(obs))
    # garbage is a miss too, and the recompile writes a good entry back
    for path in _entries(cache_dir):
        with open(path, "wb") as f:
            f.write(b"not gzip at all")
    obs, _, _ = _run()
    assert all("unreadable" in d["note"] for d in _chain_events(obs))
    obs, _, _ = _run()
    assert all(d["hit"] for d in _chain_events(obs))


def test_the_size_cap_evicts_the_least_recently_used(cache_dir, monkeypatch):
    _run()
    entries = _entries(cache_dir)
    sizes = {p: os.path.getsize(p) for p in entries}
    old, new = sorted(entries, key=os.path.getmtime)
    os.utime(old, (1, 1))
    parts = glob.glob(os.path.join(cache_dir, "compile", "*", "*.part.json"))  # the partition's choice
    graphs = glob.glob(os.path.join(cache_dir, "compile", "*", "*.graph.json.gz"))  # the graph entry
    assert len(parts) == 1 and len(graphs) == 1
    for p in graphs:  # used after the chains: evicted after them
        os.utime(p, (4e9, 4e9))
    cache = CompileCache(cap_bytes=sizes[new] + os.path.getsize(parts[0]) + os.path.getsize(graphs[0]))  # one cap over all kinds
    assert cache.evict() == [old]
    assert _entries(cache_dir) == [new]


def test_no_cache_bypasses_it(cache_dir):
    _run(cache=False)
    assert _entries(cache_dir) == []
    _run()
    obs, _, _ = _run(cache=False)
    assert not any(e == "compile_cache" for _, e, _ in obs.events)
    assert not any(t.meta.get("from_cache") for *_, t in _pipeline(obs))


@pytest.mark.slow
def test_run_reads_the_cache_and_no_cache_bypasses_it(tmp_path):
    """``thundervis run`` twice: the second run's passes are from cache, and ``show`` says so;
    ``--no-cache`` neither writes nor reads it."""
    import subprocess
    import sys
    script = tmp_path / "train.py"
    script.write_text("import torch\n"
                      "m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())\n"
                      "f = torch.compile(m)\n"
                      "f(torch.randn(4, 8)).sum().backward()\n")
    env = {k: v for k, v in os.environ.items() if k != "THUNDERVIS_COMPILE_CACHE"}
    env["THUNDERVIS_CACHE_DIR"] = str(tmp_path / "cache")

    def run(name, *flags):
        rec = str(tmp_path / f"{name}.tvrec")
        done = subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", *flags, "-o", rec, str(script)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        shown = subprocess.run([sys.executable, "-m", "thundervis", "show", rec, "--pass", "fuse", "--plain"],
                               env=env, capture_output=True, text=True, timeout=300)
        return shown.stdout.splitlines()[0]

    assert "(from cache)" not in run("bypassed", "--no-cache")
    assert _entries(tmp_path / "cache") == []
    assert "(from cache)" not in run("cold")
    assert len(_entries(tmp_path / "cache")) == 2
    assert run("warm").endswith('after "fuse" (from cache)')
    assert "(from cache)" not in run("bypassed_again", "--no-cache")
