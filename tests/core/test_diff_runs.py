"""Run comparison: same run twice, different executors, different scripts, timing deltas."""
from __future__ import annotations

import re

from test_diff_fixtures import compiled
from thundervis.diff.runs import (ADDED, EXECUTOR, MERGED, REMOVED, SAME, SPLIT, GraphSide, RunSide,
                                  compare_runs, fusions_of_trace, graph_signature)


def side(executors, label="a", script="train.py", timings=None, graphs=(0,)) -> RunSide:
    obs = compiled(executors)
    out = []
    for g in graphs:
        finals = {c: obs.chain(c)[-1] for c in ("forward", "backward")}
        sig, sources = graph_signature(obs.chain("forward")[0])
        out.append(GraphSide(g, sig, sources, finals, dict(timings or {})))
    return RunSide(label, script, list(executors), out)


def test_same_run_twice_has_no_differences():
    comp = compare_runs(side(("pwfuse",)), side(("pwfuse",), "b"))
    assert comp.differences() == []
    assert comp.counts()[SAME] == len(comp.changes) > 0
    st = comp.match_stats()
    assert st["fusions_matched"] == st["fusions_a"] == st["fusions_b"] and st["fused_ops_shared_fraction"] == 1.0
    assert "no fusion differences" in comp.render_text()


def test_different_executors_list_fusion_differences():
    comp = compare_runs(side(("pwfuse",)), side(("pwfuse3",), "b"))
    kinds = {c.kind for c in comp.differences()}
    assert SPLIT in kinds
    splits = [c for c in comp.differences() if c.kind == SPLIT]
    for c in splits:
        assert len(c.a) == 1 and len(c.b) > 1
        assert sorted(x for f in c.b for x in f.atoms) == sorted(c.a[0].atoms)
    text = comp.render_text()
    assert re.search(r"split \w+_fusion_\d+ \[", text)
    assert any("executors differ" in n for n in comp.notes)
    back = compare_runs(side(("pwfuse3",)), side(("pwfuse",), "b"))
    assert MERGED in {c.kind for c in back.differences()}
    js = comp.as_json()
    assert js["counts"][SPLIT] == len(splits) and js["differences"]


def test_executor_change_and_fusions_added_or_removed():
    a = side(("pwfuse",))
    renamed = {c: t.replace(symbols=tuple(s.replace(executor="other") if s.fusion else s
                                          for s in t.symbols)) for c, t in a.graphs[0].finals.items()}
    b = RunSide("b", "train.py", None, [GraphSide(0, a.graphs[0].signature, a.graphs[0].sources, renamed)])
    assert {c.kind for c in compare_runs(a, b).differences()} == {EXECUTOR}
    torch_only = side(("torch",), "t")
    comp = compare_runs(a, torch_only)
    assert {c.kind for c in comp.differences()} == {REMOVED}
    assert {c.kind for c in compare_runs(torch_only, a).differences()} == {ADDED}


def test_timing_deltas_when_both_runs_have_timings():
    names = [f.name for f in fusions_of_trace(compiled(("pwfuse",)).chain("forward")[-1])]
    ta = {("forward", n): 10.0 for n in names}
    tb = {("forward", n): 7.5 for n in names}
    comp = compare_runs(side(("pwfuse",), timings=ta), side(("pwfuse",), "b", timings=tb))
    deltas = comp.timing_deltas()
    assert len(deltas) == len(names) and all(d["delta_us"] == -2.5 for d in deltas)
    assert "kernel time" in comp.render_text()
    assert compare_runs(side(("pwfuse",), timings=ta), side(("pwfuse",), "b")).timing_deltas() == []


def test_chain_wall_times_are_compared_where_both_runs_timed_them():
    a, b = side(("pwfuse",)), side(("pwfuse",), "b")
    a.graphs[0].chain_walls.update(forward=2000.0, backward=3000.0)
    b.graphs[0].chain_walls.update(forward=1500.0)  # its backward was not timed
    comp = compare_runs(a, b)
    (d,) = comp.chain_time_deltas()
    assert d == {"graph_a": 0, "graph_b": 0, "chain": "forward", "a_us": 2000.0, "b_us": 1500.0,
                 "delta_us": -500.0, "ratio": 0.75}
    assert comp.as_json()["chain_time_deltas"] == [d]
    text = comp.render_text()
    assert "chain time per call (wall, median)   A -> B   B/A\n  graph 0 forward: 2.00 ms -> 1.50 ms  0.75x" in text
    assert compare_runs(side(("pwfuse",)), side(("pwfuse",), "b")).chain_time_deltas() == []
    assert "chain time" not in compare_runs(side(("pwfuse",)), side(("pwfuse",), "b")).render_text()


def test_different_scripts_are_compared_anyway_with_match_stats():
    a = side(("pwfuse",), script="one.py")
    b = side(("pwfuse",), "b", script="two.py", graphs=(0, 1))
    comp = compare_runs(a, b)
    assert not comp.same_script and comp.graphs_only_b == [1]
    assert any("different scripts" in n for n in comp.notes)
    assert any("matched 1 of 2 graphs" in n for n in comp.notes)
