"""Kernel names in a real recording: forward and backward kernels named apart, every name unique in
the recording, fusion symbols flagged in the recorded traces, and ``rerun``/``repro`` taking the new
names; the typed kernel records reach the recording through the observer."""
from __future__ import annotations

import os
import re
import zlib

import pytest

from thundervis.compiler.executors import get_executor
from thundervis.recording import open_recording

from core_helpers import run_cli, write_script


def _triton_available() -> bool:
    try:
        return get_executor("triton").available() is None
    except KeyError:
        return False


pytestmark = pytest.mark.skipif(not _triton_available(), reason="the triton executor is not available")


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("names")
    script = write_script(folder, "train_names.py", """
        for _ in range(2):
            model(torch.randn(4, 8)).backward()
    """)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(str(folder), "n.tvrec")),
                        executors=None)
    assert result.exit_code == 0, result
    return result.path


def test_kernel_names_are_unique_and_say_forward_or_backward(rec):
    with open_recording(rec) as r:
        kernels = r.kernels()
        names = [k.name for k in kernels]
        assert len(names) == len(set(names)), names
        assert {k.chain for k in kernels} == {"forward", "backward"}
        for k in kernels:
            assert re.fullmatch(("fw" if k.chain == "forward" else "bw") + r"_fusion_\d+", k.name), k.name
        for chain in ("forward", "backward"):
            fused = r.pass_trace(0, chain, next(p.index for p in r.graph(0).chain(chain).passes if p.name == "fuse"))
            flagged = [b.sym for b in fused.symbols if b.fusion]
            assert flagged == [k.name for k in kernels if k.chain == chain]
            assert fused.fx_names  # the readable inputs' FX names travel with the recorded trace


def test_rerun_and_repro_take_the_new_names(rec, capsys, tmp_path):
    with open_recording(rec) as r:
        name = next(k.name for k in r.kernels() if k.chain == "backward")
    code, out, err = run_cli(capsys, "rerun", rec, name, "--executor", "torch", "--iters", "1")
    assert code == 0, err
    assert name in out and "graph 0 backward" in out
    code, _, err = run_cli(capsys, "repro", rec, name, "-o", tmp_path / "r.py")
    assert code == 0, err
    assert f"def {name}" in (tmp_path / "r.py").read_text() or name in (tmp_path / "r.py").read_text()
    code, _, err = run_cli(capsys, "rerun", rec, "triton_fusion_0", "--executor", "torch")
    assert code == 2 and "closest" in err and "_fusion_" in err


def test_an_older_recording_gets_its_fusion_flags_from_its_kernel_rows(rec, tmp_path):
    import json
    import shutil
    import sqlite3
    old = str(tmp_path / "old.tvrec")
    shutil.copy(rec, old)
    with open_recording(old) as r:
        fuse = next(p.index for p in r.graph(0).chain("forward").passes if p.name == "fuse")
        names = [k.name for k in r.kernels() if k.chain == "forward"]
        text = r.pass_json(0, "forward", fuse)  # whole texts (schema 4 may store deltas)
        printed = zlib.compress(r.pass_text(0, "forward", fuse).encode())
    with sqlite3.connect(old) as c:  # what a recording written before format 2 holds
        d = json.loads(text)
        d["format"] = 1
        for s in d["symbols"]:
            s.pop("fusion", None)
        c.execute("UPDATE passes SET trace_json=?, printed=?, delta_base=NULL WHERE graph_id=0 AND chain='forward'"
                  " AND idx=?", (json.dumps(d), printed, fuse))
    with open_recording(old) as r:
        assert [b.sym for b in r.pass_trace(0, "forward", fuse).symbols if b.fusion] == names
