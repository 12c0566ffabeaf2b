"""Golden diffs of each pass kind on a small compiled model, and the pass-change fingerprints.

Goldens live in tests/core/golden/diff_<pass>.txt; regenerate with THUNDERVIS_UPDATE_GOLDEN=1.
"""
from __future__ import annotations

import os

import pytest

from test_diff_fixtures import compiled, pass_pair
from thundervis.diff import (ADDED, CHANGED, FUSED, REPLACED, changed_pass_names, diff_traces, pass_changes,
                             trace_fingerprint)
from thundervis.diff.render import unified_plain

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
# Every pass kind the goldens must cover; passes the pipeline runs besides these get goldens too.
PASS_KINDS = ("decompose", "cse", "dce", "claim", "fuse", "liveness", "codegen")
# Goldens per remat policy: auto (the default) runs the min-cut partition, whose partitioner CSEs the
# joint graph itself (so our cse pass finds nothing left to merge in Block); off runs the graph as
# the model wrote it, repeated product included.
POLICY_SUFFIX = {"auto": "", "off": "_remat_off"}


def check_golden(name: str, text: str) -> None:
    path = os.path.join(GOLDEN, name)
    if os.environ.get("THUNDERVIS_UPDATE_GOLDEN") == "1":
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    assert os.path.exists(path), f"missing golden {name}: run with THUNDERVIS_UPDATE_GOLDEN=1"
    with open(path, encoding="utf-8") as f:
        assert text == f.read(), f"{name} differs from its golden (THUNDERVIS_UPDATE_GOLDEN=1 updates it)"


def test_every_pass_kind_is_in_the_pipeline():
    names = [t.pass_name for t in compiled().chain("forward")]
    assert set(PASS_KINDS) <= set(names)


@pytest.mark.parametrize("remat", sorted(POLICY_SUFFIX))
@pytest.mark.parametrize("kind", PASS_KINDS)
def test_pass_diff_golden(kind, remat):
    """The diff of each pass against the pass before it (whatever that is) matches its golden."""
    traces = compiled(("pwfuse",), remat).chain("forward")
    k = [t.pass_name for t in traces].index(kind)
    d = diff_traces(traces[k - 1], traces[k])
    check_golden(f"diff_{kind}{POLICY_SUFFIX[remat]}.txt", unified_plain(d) + d.summary() + "\n")


@pytest.mark.parametrize("chain", ("forward", "backward"))
def test_remat_diff_golden(chain):
    """Pass 1, remat: the off partition's chain (acquire) against the min-cut one that runs."""
    d = diff_traces(*pass_pair(chain, "acquire", "remat"))
    check_golden(f"diff_remat_{chain}.txt", unified_plain(d) + d.summary() + "\n")


def test_remat_off_changes_nothing():
    for chain in ("forward", "backward"):
        d = diff_traces(*pass_pair(chain, "acquire", "remat", remat="off"))
        assert not d.changed, chain


def test_decompose_diff_shows_renames_and_new_prims():
    # remat is the pass before decompose: acquire is the off partition's chain, not the one that runs
    d = diff_traces(*pass_pair("forward", "remat", "decompose"))
    changed = [r for r in d.lines if r.status == CHANGED]
    assert any(r.a.text.startswith("t6 = aten.mul.Tensor") and r.b.text.startswith("t6 = prims.mul") for r in changed)
    added = [r for r in d.lines if r.status == ADDED]
    assert added and all(r.b.depth == 1 and r.partners for r in added)


def test_cse_diff_says_merged():
    # remat off: under auto the min-cut partitioner has CSEd the joint graph before our cse runs
    d = diff_traces(*pass_pair("forward", "decompose", "cse", remat="off"))
    merged = [r for r in d.lines if r.status == REPLACED]
    assert len(merged) == 1 and merged[0].how == "merged"
    assert merged[0].a.key == "t7 = prims.mul(t5, 2)" and merged[0].partners[0].text.startswith("t6 = prims.mul")
    assert merged[0].a.text.startswith("t7 = prims.mul(t5, 2) ") and "# t7: cpu f32[4, 32]" in merged[0].a.text


def test_claim_diff_says_flattened():
    traces = compiled().chain("forward")
    k = [t.pass_name for t in traces].index("claim")
    d = diff_traces(traces[k - 1], traces[k])
    flat = [r for r in d.lines if r.status == REPLACED]
    assert flat and all(r.how == "flattened" for r in flat)
    assert any(r.a.sym == "aten.native_layer_norm.default" for r in flat)


def test_decompose_to_fuse_shows_which_ops_became_which_kernels():
    a, b = pass_pair("forward", "decompose", "fuse")
    d = diff_traces(a, b)
    kernels = d.kernels()
    fusions = [s for s in b.symbols if s.fusion]
    assert set(kernels) == {f.sym for f in fusions}
    for f in fusions:
        assert {r.a.uid for r in kernels[f.sym]} == {s.uid for s in f.subsymbols}
    assert all(r.status == FUSED for rows in kernels.values() for r in rows)


def test_fingerprints_find_the_passes_that_changed_the_trace():
    traces = compiled().chain("forward")
    changes = pass_changes(traces)
    assert [c.name for c in changes] == [t.pass_name for t in traces]
    assert changes[0].changed
    names = changed_pass_names(traces)
    assert "decompose" in names and "fuse" in names and "liveness" in names
    assert "dce" not in names and "codegen" not in names
    for before, after in zip(traces, traces[1:]):
        same = trace_fingerprint(before) == trace_fingerprint(after)
        assert same == (not diff_traces(before, after).changed)
