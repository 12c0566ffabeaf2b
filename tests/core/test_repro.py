"""``thundervis repro``: a standalone script (torch + the kernel's executor) that rebuilds, checks
and times one fusion, generated from the validated IR only."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from thundervis.compiler.executors import get_executor
from thundervis.compiler.ir import BoundSymbol, TensorProxy
from thundervis.repro import _Names, reference_source, repro_source

import kernel_fixtures as kf
from core_helpers import run_cli


def _triton_available() -> bool:
    try:
        return get_executor("triton").available() is None
    except KeyError:
        return False


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("repro")
    record = kf.kernel_record(kf.region_trace("cpu"))
    record["code"] = "import os; os.system('echo recorded text must never be copied')\n"
    return kf.make_recording(os.path.join(str(folder), "k.tvrec"), [(0, "forward", record)])


@pytest.mark.skipif(not _triton_available(), reason="the triton executor is not available")
def test_repro_script_runs_on_its_own(rec, tmp_path, capsys):
    out = tmp_path / "repro.py"
    code, stdout, err = run_cli(capsys, "repro", rec, "triton_fusion_0", "-o", out)
    assert code == 0, err
    text = out.read_text()
    assert "recorded text must never be copied" not in text
    assert "@triton.jit" in text and "def reference(v0, v1):" in text
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(out), "--iters", "2"], capture_output=True, text=True,
                          cwd=str(tmp_path), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"RESULT triton_fusion_0 median_us=(\S+) min_us=(\S+) max_abs_error=(\S+) "
                  r"max_rel_error=(\S+) clock=host", proc.stdout)
    assert m, proc.stdout
    assert float(m.group(2)) > 0 and float(m.group(3)) < 1e-5 and float(m.group(4)) < 1e-5
    assert "executor   status" in proc.stdout  # the same table as rerun
    # Same inputs (seed 0) as rerun's random inputs: the same error.
    from thundervis.rerun import rerun_kernel
    r = rerun_kernel(rec, "triton_fusion_0", executor="triton", iters=1, store=False).results[0]
    assert f"{r.max_abs_error:.3e}" == m.group(3)


def test_nvfuser_repro_is_generated_from_the_ir():
    region = kf.region_trace("cuda:0", "nvfusion_0")
    src = repro_source(region, "nvfusion_0", "nvfuser", "graph 0 forward", "cuda:0")
    tree = ast.parse(src)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"nvfusion_0", "run_kernel", "reference", "make_inputs", "main"} <= names
    assert "fd.execute" in src and "FusionDefinition" in src


def test_reference_embeds_strings_through_repr_only():
    evil = "'); import os; os.system('boom') #"
    a = TensorProxy("a", (2,), "float32", "cpu", (1,))
    b = TensorProxy("b", (2,), "float32", "cpu", (1,))
    t = TensorProxy("t", (2,), "float32", "cpu", (1,))
    region = kf.region_trace().replace(
        inputs=(a, b), outputs=(t,),
        symbols=(BoundSymbol("prims.div", (a, b), {"rounding_mode": evil}, t, "f1"),))
    names = _Names()
    src = reference_source(region, names)
    tree = ast.parse(src)
    consts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert evil in consts and "aten.div" in consts
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))
    assert "def reference(v0, v1):" in src and "v2 = _aten('aten.div')(v0, v1, rounding_mode=" in src


def test_repro_errors(rec, tmp_path, capsys):
    code, _, err = run_cli(capsys, "repro", rec, "trtion_fusion_0", "-o", tmp_path / "x.py")
    assert code == 2 and "triton_fusion_0" in err
    code, _, err = run_cli(capsys, "repro", tmp_path / "none.tvrec", "triton_fusion_0", "-o", tmp_path / "x.py")
    assert code == 2 and "does not exist" in err
    code, _, err = run_cli(capsys, "repro", rec, "triton_fusion_0", "-o", tmp_path)
    assert code == 2 and "directory" in err
    assert not (tmp_path / "x.py").exists()
