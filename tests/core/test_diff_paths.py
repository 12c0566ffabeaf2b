"""``diff A B`` reports which fusions ran via torch and which via Inductor when that differs, even
with the very same fusions (issue 40: it said "no fusion differences" at 17/37 against 28/26)."""
from __future__ import annotations

from test_diff_runs import side
from thundervis.diff.paths import fusion_paths
from thundervis.diff.runs import compare_runs
from thundervis.recording.model_runs import Event


def _paths(run, vias):
    names = [(g.id, c, b.sym) for g in run.graphs for c, t in g.finals.items() for b in t.symbols
             if b.subsymbols and "fusion" in b.sym]
    assert len(names) >= 3
    return {key: f"cpu via {via}" for key, via in zip(names, vias * len(names))}


def test_the_same_fusions_run_through_other_paths_is_a_difference():
    a, b = side(("pwfuse",)), side(("pwfuse",), "b")
    a.paths = _paths(a, ["torch", "inductor", "inductor"])
    b.paths = _paths(b, ["torch", "torch", "inductor"])
    comp = compare_runs(a, b)
    assert comp.differences() == []  # what was fused is the same
    text = comp.render_text()
    assert "no fusion differences in what was fused" in text
    n = len(a.paths)
    na_torch = sum(v.endswith("torch") for v in a.paths.values())
    nb_torch = sum(v.endswith("torch") for v in b.paths.values())
    assert (f"paths that ran the fusions differ: A {n - na_torch} via inductor, {na_torch} via torch; "
            f"B {n - nb_torch} via inductor, {nb_torch} via torch") in text
    moved = comp.paths.changes
    assert moved and all(c.via_a == "cpu via inductor" and c.via_b == "cpu via torch" for c in moved)
    assert f"  {moved[0].describe()}" in text and ": cpu via inductor -> cpu via torch" in text
    doc = comp.as_json()["paths"]
    assert doc["a"] == {"cpu via inductor": n - na_torch, "cpu via torch": na_torch} and len(doc["changes"]) == len(moved)


def test_the_same_paths_say_nothing_more():
    a, b = side(("pwfuse",)), side(("pwfuse",), "b")
    a.paths = b.paths = _paths(a, ["torch", "inductor"])
    comp = compare_runs(a, b)
    assert not comp.paths.differs and "no fusion differences\n" in comp.render_text()
    assert "paths" not in comp.render_text()


def test_fusion_paths_read_the_recorded_kernel_path_events():
    ev = [Event(0, "forward", "kernel_path", {"kernel": "fw_fusion_0", "device": "cpu", "via": "inductor"}, 0.0),
          Event(0, "forward", "kernel_path", {"kernel": "fw_fusion_1", "device": "cpu", "via": "torch"}, 0.0),
          Event(0, "forward", "kernel_path", {"kernel": 3, "via": "torch"}, 0.0)]  # not a kernel name
    assert fusion_paths(ev) == {(0, "forward", "fw_fusion_0"): "cpu via inductor",
                                (0, "forward", "fw_fusion_1"): "cpu via torch"}
