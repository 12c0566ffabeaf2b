"""A graph's compile time counts both chains: the forward (the graph's compile_s) plus the backward,
which AOTAutograd compiles lazily at the first backward (issue 40: "graph 0 compiled in 4.77 s"
left out the 21.6 s of Mamba's backward). Every view shows present/compile_times.py's words."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from thundervis.present.compile_times import (GraphCompileTime, compile_times, run_cache_text, run_compile_s,
                                              run_compile_text)
from thundervis.recording import open_recording
from thundervis.recording.model_runs import Event

from core_helpers import run_cli, write_script

TIME = r"\d+(\.\d+)? (s|ms|µs)"


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    """A real tiny training step (graph 0: forward and backward) and a no-grad call (graph 1:
    inference), run through ``thundervis run``; returns (recording path, run's stdout)."""
    import io
    from contextlib import redirect_stdout
    from thundervis.cli import main
    folder = tmp_path_factory.mktemp("ct")
    script = write_script(folder, "train.py", """
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            model(torch.randn(4, 8)).backward()
            opt.step()
            opt.zero_grad()
        with torch.no_grad():
            model(torch.randn(4, 8))
    """)
    out = str(folder / "t.tvrec")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["run", "--no-view", "--executors", "torch", "-o", out, script]) == 0
    return out, buf.getvalue()


def test_the_backward_is_added_to_the_graphs_compile_time(training_run):
    path, _ = training_run
    with open_recording(path) as rec:
        graphs = rec.graphs()
        times = compile_times(graphs, rec.events("chain_compiled"))
    train, infer = times[0], times[1]
    assert train.backward == "compiled" and 0 < train.backward_s < 60
    assert train.forward_s == graphs[0].compile_s
    assert train.total_s == pytest.approx(train.forward_s + train.backward_s)
    assert re.fullmatch(rf"compiled in {TIME} \(forward {TIME} \+ backward {TIME}\)", train.text), train.text
    assert infer.backward == "none" and re.fullmatch(rf"compiled in {TIME}", infer.text)
    assert run_compile_s(times) == pytest.approx(train.total_s + infer.total_s)
    assert run_compile_text(times).startswith("compiled 2 graphs in ")


def test_run_summary_and_ls_text_and_json_show_both_parts(training_run, capsys):
    path, stdout = training_run
    with open_recording(path) as rec:
        text = compile_times(rec.graphs(), rec.events())[0].text
    assert re.search(rf"thundervis: compiled 2 graphs in {TIME} \(forward {TIME} \+ backward {TIME}\)", stdout), stdout
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0 and f"graph 0  {text}" in out, out
    doc = json.loads(run_cli(capsys, "ls", path, "--json")[1])
    c = doc["graphs"][0]["compile"]
    assert c["backward"] == "compiled" and c["text"] == text
    assert c["total_ms"] == pytest.approx(c["forward_ms"] + c["backward_ms"])
    assert c["forward_ms"] == pytest.approx(doc["graphs"][0]["compile_ms"])
    assert doc["graphs"][1]["compile"]["backward"] == "none" and doc["compile_text"].startswith("compiled 2 graphs")


def test_the_tui_and_the_widget_show_the_same_words(training_run):
    path, _ = training_run
    from notebook_ext.data import RecordingData
    from thundervis.present.overview import read_overview
    with open_recording(path) as rec:
        view = read_overview(rec)
        payload = RecordingData(rec).payload()
    text = view.compile_time(0).text
    assert "+ backward" in text and payload["graphs"][0]["compile"]["text"] == text
    pytest.importorskip("textual")
    from tui.panels import run_summary
    assert f"graph 0 · {text}" in run_summary(view).plain


def _graph(id, kinds, compile_s=1.0, status="compiled", whole_failed=False):
    chains = tuple(SimpleNamespace(kind=k, status=status if k == "backward" else "compiled") for k in kinds)
    failures = (SimpleNamespace(chain=None),) if whole_failed else ()
    return SimpleNamespace(id=id, chains=chains, failures=failures, compile_s=compile_s)


def test_what_became_of_the_backward_is_said():
    ev = lambda g, c, data: Event(g, c, "chain_compiled", data, 0.0)  # noqa: E731
    graphs = [_graph(0, ["forward"]), _graph(1, ["forward", "backward"], status="compiling"),
              _graph(2, ["forward", "backward"]), _graph(3, ["forward", "backward"], compile_s=None),
              _graph(4, ["inference"]), _graph(5, ["forward", "backward"])]
    # hostile data: a string, a negative number, a bool, infinity are not times
    events = [ev(2, "backward", {"seconds": "3"}), ev(5, "backward", {"seconds": -1}),
              ev(5, "backward", {"seconds": True}), ev(5, "backward", {"seconds": float("inf")}),
              ev(2, "forward", {"seconds": 0.5})]
    t = compile_times(graphs, events)
    assert t[0].text == "compiled in 1.00 s (forward; the backward never ran)"
    assert t[1].text == "forward compiled in 1.00 s, backward compiling"
    assert t[2].backward == "not recorded" and t[2].text == "compiled in 1.00 s (forward; backward time not recorded)"
    assert t[3].text == "compiling" and t[3].total_s is None
    assert t[4].text == "compiled in 1.00 s" and t[5].backward == "not recorded"
    assert GraphCompileTime(9, 2.0, 0.5, "compiled").text == "compiled in 2.50 s (forward 2.00 s + backward 500.00 ms)"
    assert run_compile_text({}) is None and run_compile_s({}) is None


def test_what_came_from_the_compile_cache_is_said():
    ev = lambda g, c, name, data: Event(g, c, name, data, 0.0)  # noqa: E731
    graphs = [_graph(0, ["forward", "backward"]), _graph(1, ["forward", "backward"]), _graph(2, ["inference"]),
              _graph(3, ["forward", "backward"])]
    events = [ev(0, "joint", "partition_cache", {"hit": True}), ev(0, "forward", "compile_cache", {"hit": True}),
              ev(0, "forward", "chain_compiled", {"seconds": 0.25}), ev(0, "backward", "compile_cache", {"hit": True}),
              ev(0, "backward", "chain_compiled", {"seconds": 0.5}),
              ev(1, "joint", "partition_cache", {"hit": False, "note": "refused"}),
              ev(1, "forward", "compile_cache", {"hit": True}), ev(1, "backward", "compile_cache", {"hit": True}),
              # hostile data: a hit that is not a bool says nothing
              ev(3, "forward", "compile_cache", {"hit": "yes"}), ev(3, "backward", "compile_cache", {"hit": 1}),
              ev(3, "joint", "partition_cache", ["hit"])]
    t = compile_times(graphs, events)
    assert t[0].from_cache == "all" and t[0].text == "compiled in 1.50 s (forward 1.00 s + backward 500.00 ms), from cache"
    assert t[0].chain_text("forward") == "built in 250.00 ms after the partition, from cache" and t[0].chain_from_cache("backward")
    assert [t[0].pass_from_cache("forward", n) for n in ("acquire", "remat", "fuse")] == [False, True, True]
    assert t[1].from_cache == "some" and t[1].text.endswith(", partly from cache (forward, backward)")
    assert not t[1].pass_from_cache("backward", "remat") and t[1].pass_from_cache("backward", "codegen")
    assert t[2].from_cache is None and t[3].from_cache is None and "cache" not in t[2].text + t[3].text
    doc = t[0].as_json()
    assert doc["from_cache"] == "all" and doc["cache_text"] == "from cache"
    assert doc["chains"]["forward"] == {"ms": 250.0, "from_cache": True, "text": "built in 250.00 ms after the partition, from cache"}
    assert run_cache_text({0: t[0]}) == "from cache" and run_cache_text({2: t[2]}) == ""
    assert run_cache_text(t) == "1 of 2 graphs from cache (others in part)"
    assert run_compile_text({0: t[0]}).endswith("(forward 1.00 s + backward 500.00 ms), from cache")


@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory):
    """The training script run twice with the compile cache on (a fresh folder): (cold, warm)
    recording paths and the warm run's stdout."""
    import io
    from contextlib import redirect_stdout
    from thundervis.cli import main
    folder = tmp_path_factory.mktemp("cached")
    script = write_script(folder, "train.py", """
        model(torch.randn(4, 8)).backward()
    """)
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: the monkeypatch fixture is per test
        mp.setenv("THUNDERVIS_CACHE_DIR", str(folder / "cache"))
        mp.delenv("THUNDERVIS_COMPILE_CACHE", raising=False)
        outs = []
        for name in ("cold", "warm"):
            out = str(folder / f"{name}.tvrec")
            buf = io.StringIO()
            with redirect_stdout(buf):
                assert main(["run", "--no-view", "--executors", "torch", "-o", out, script]) == 0
            outs.append((out, buf.getvalue()))
    return outs[0][0], outs[1][0], outs[1][1]


def test_every_view_says_what_came_from_the_cache(cached_runs, capsys):
    cold, warm, stdout = cached_runs
    assert re.search(rf"thundervis: compiled 1 graph in {TIME} \(forward .*\), from cache", stdout), stdout
    code, out, _ = run_cli(capsys, "ls", warm)
    assert code == 0 and re.search(rf"graph 0  compiled in {TIME} .*, from cache", out), out
    assert re.search(rf"  forward +compiled · .* · built in {TIME} after the partition, from cache", out), out
    assert re.search(r"  1 remat .* from cache", out), out
    # the graph entry replays the joint trace and each chain's acquire; Dynamo's graph is acquired anew
    dynamo, joint = (re.search(rf"  {c} .*\n(.*\n)", out).group(1) for c in ("dynamo", "joint"))
    assert "from cache" not in dynamo and "from cache" in joint, out
    cold_out = run_cli(capsys, "ls", cold)[1]
    assert "from cache" not in cold_out and re.search(rf"  backward +compiled · .* · built in {TIME} after the partition$", cold_out, re.M)
    doc = json.loads(run_cli(capsys, "ls", warm, "--json")[1])
    c = doc["graphs"][0]["compile"]
    assert c["from_cache"] == "all" and c["chains"]["backward"]["from_cache"] is True
    assert doc["compile_text"].endswith(", from cache")
    from notebook_ext.data import RecordingData
    from thundervis.present.overview import read_overview
    with open_recording(warm) as rec:
        view = read_overview(rec)
        payload = RecordingData(rec).payload()
    ct = view.compile_time(0)
    assert payload["graphs"][0]["compile"] == ct.as_json() and ct.text.endswith(", from cache")
    pytest.importorskip("textual")
    from tui.panels import chain_row, pass_row, topbar
    g = view.graphs[0]
    fw = next(c for c in g.chains if c.kind == "forward")
    assert "from cache" in topbar(view).plain
    assert chain_row(fw, None, cached=ct.chain_from_cache("forward")).plain.endswith("from cache")
    rows = {p.name: pass_row(p, cached=ct.pass_from_cache("forward", p.name)).plain for p in fw.passes}
    assert rows["decompose"].endswith(" cache") and rows["acquire"].endswith(" cache")
    dyn = next(c for c in g.chains if c.kind == "dynamo")
    assert not pass_row(dyn.passes[0], cached=ct.pass_from_cache("dynamo", "acquire")).plain.endswith(" cache")
