"""The rows that share their fields with another (issue 20's duplicates): what they print and send
stays what it was before they shared them."""
from __future__ import annotations

import json
import types

from thundervis.recording.builds import KernelBuild
from thundervis.recording.collectives import ChainCall
from thundervis.recording.model import ChainRef, KernelInfo, KernelRef, PassRef


def test_divergence_json_is_flat_with_or_without_a_symbol():
    from thundervis.bisect import BisectReport, Divergence, DivergingSymbol, report_lines
    keys = ["index", "pass_name", "uid", "sym", "output", "max_rel", "previous_rel", "source", "code", "module",
            "kernel", "kernel_executor"]
    bare = Divergence(3, "fuse").as_json()
    assert list(bare) == keys and all(bare[k] is None for k in keys[2:])
    s = DivergingSymbol("u7", "prims.add", "t3", 0.5, 1e-7, "train.py:9", "y = x + 1", "model.fc", "fw_fusion_0",
                        "triton")
    d = Divergence(3, "fuse", s)
    assert list(d.as_json()) == keys and json.loads(json.dumps(d.as_json()))["output"] == "t3"
    lines = report_lines(BisectReport(0, "forward", "random", divergence=d))
    assert lines[-5:] == ["first divergence: pass 3 fuse",
                          "  symbol  prims.add (u7) -> t3: max rel 5.00e-01 (previous pass 1.00e-07)",
                          "  source  train.py:9  y = x + 1", "  module  model.fc", "  kernel  fw_fusion_0 [triton]"]
    assert report_lines(BisectReport(0, "forward", "random", divergence=Divergence(2, "cse")))[-1] == \
        "  no single symbol's output diverges from the previous pass (the outputs do)"


def test_kernel_build_json_is_every_field_in_order():
    b = KernelBuild(0, "forward", "fw_fusion_0", "sm_90", "ok", None, 1.5, 32, 0, 0, 0, 0.5, "key",
                    plan={"grid": [4]}, functions=("k0",), line_uids={12: ["u1"]}, members={"u1": {"op": "add"}})
    d = b.as_json()
    assert list(d) == list(KernelBuild.__dataclass_fields__)
    assert d["functions"] == ["k0"] and d["line_uids"] == {"12": ["u1"]} and d["plan"] == {"grid": [4]}
    json.dumps(d)


def test_places_share_their_chain_but_stay_apart():
    assert isinstance(PassRef(0, "forward", 1), ChainRef) and isinstance(ChainCall(0, "forward", 1), ChainRef)
    assert PassRef(0, "forward", 1) != ChainCall(0, "forward", 1)
    assert sorted([PassRef(1, "a", 0), PassRef(0, "b", 2), PassRef(0, "b", 1)])[0] == PassRef(0, "b", 1)
    assert str(ChainCall(0, "backward", 2)) == "graph 0 backward call 2"
    assert ChainCall(0, "forward", 2).as_json() == {"graph": 0, "chain": "forward", "call": 2}
    assert issubclass(KernelInfo, KernelRef)


def test_run_help_states_the_defaults_it_applies(capsys, monkeypatch):
    import pytest
    from thundervis.cli import main
    from thundervis.commands import profile_options as po
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps at hyphens too: one line per option
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"calls of each chain before profiling starts (default {po.DEFAULT_WARMUP})" in out
    assert (f"calls of each chain that are profiled (default {po.DEFAULT_STEPS}; at most K samples are kept; "
            "the K calls after them give the chain's wall time per call)") in out
    assert (f"calls of each chain that --check-numerics / --compare-eager check (default {po.DEFAULT_CHECK_STEPS})"
            in out)


def test_view_overview_reads_the_overviews_fields():
    from thundervis.present.overview import ViewOverview
    ov = types.SimpleNamespace(path="r.tvrec", run="the run", graphs=("g0",), revision=7)
    v = ViewOverview(ov, (), (), ())
    assert (v.path, v.run, v.graphs, v.revision) == ("r.tvrec", "the run", ("g0",), 7)
    assert ViewOverview.path.__doc__
