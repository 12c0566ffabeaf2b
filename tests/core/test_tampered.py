"""Tampered recordings never run code: the two command-execution cases of issue 11, as tests.

A recording is a file people send each other. Its stored IR is rebuilt only through the op registry
(``compiler/registry.py``): a kernel IR naming ``torch.os.system`` is refused before anything runs,
and a kwarg key holding a newline can no longer end the comment line a code generator copies the IR
into. Each case must exit 2 with one sentence and leave no canary file.
"""
from __future__ import annotations

import os

import pytest

from thundervis.compiler.serialize import trace_to_dict

import kernel_fixtures as kf
from core_helpers import run_cli


def _tampered(folder, region_dict: dict, name: str = "triton_fusion_0") -> str:
    """Return a recording holding one kernel whose recorded IR is ``region_dict``."""
    record = kf.kernel_record(kf.region_trace("cpu", name))
    record["trace"] = region_dict
    return kf.make_recording(os.path.join(str(folder), "tampered.tvrec"), [(0, "forward", record)])


def _os_call_region(symbol: str, canary: str) -> dict:
    """The example region with its first member replaced by ``symbol(<command creating canary>)``."""
    d = trace_to_dict(kf.region_trace("cpu"))
    first = d["symbols"][0]
    first["sym"] = symbol
    first.pop("aten", None)
    if symbol.endswith("remove"):
        first["args"] = {"T": [canary]}
    else:
        first["args"] = {"T": [f"touch {canary}"]}
    return d


@pytest.mark.parametrize("symbol", ["torch.os.system", "torch.ops.load_library", "torch.os.remove",
                                    "prims.system", "aten.from_file.default", "os.system"])
def test_rerun_refuses_a_kernel_ir_naming_a_non_op(tmp_path, capsys, symbol):
    canary = tmp_path / "canary"
    if symbol.endswith("remove"):
        canary.write_text("must survive")
    path = _tampered(tmp_path, _os_call_region(symbol, str(canary)))
    for argv in (["rerun", path, "triton_fusion_0"], ["rerun", path, "triton_fusion_0", "--executor", "torch"],
                 ["rerun", path, "triton_fusion_0", "--executor", "all"],
                 ["repro", path, "triton_fusion_0", "-o", tmp_path / "repro.py"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, (out, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert symbol[:20] in err or "not an operation" in err
    assert not (tmp_path / "repro.py").exists()
    if symbol.endswith("remove"):
        assert canary.read_text() == "must survive"
    else:
        assert not canary.exists()


def _newline_key_region(canary: str) -> dict:
    """The example region with a kwarg key that ends a comment line and runs a command."""
    d = trace_to_dict(kf.region_trace("cpu"))
    key = f"x\nimport os; os.system('touch {canary}')\n#"
    d["symbols"][0]["kwargs"] = {"K": {key: 1}}
    return d


def test_repro_refuses_a_kwarg_key_that_would_end_a_comment(tmp_path, capsys):
    canary = tmp_path / "canary"
    path = _tampered(tmp_path, _newline_key_region(str(canary)))
    out_script = tmp_path / "repro.py"
    code, out, err = run_cli(capsys, "repro", path, "triton_fusion_0", "-o", out_script)
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out_script.exists() and not canary.exists()
    code, out, err = run_cli(capsys, "rerun", path, "triton_fusion_0", "--executor", "all")
    assert code == 2 and not canary.exists(), (out, err)
