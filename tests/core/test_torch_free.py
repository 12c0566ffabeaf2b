"""The reading commands never import torch or Triton (a viewer must paint in well under a second),
and the compiling entry points still decide Triton's interpreter mode before Triton is imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from core_helpers import line_of, run_cli

# Runs the CLI in a fresh interpreter and reports the exit code, what it printed and which heavy
# modules got imported.
_PROBE = """
import contextlib, io, json, sys
from thundervis.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
heavy = sorted(m for m in ("torch", "triton", "numpy") if m in sys.modules)
sys.stderr.write(json.dumps({"code": code, "heavy": heavy, "out": out.getvalue()}))
"""


def _probe(*argv, cwd=None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", _PROBE, *map(str, argv)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=120)
    return json.loads(p.stderr.strip().splitlines()[-1])


def _commands(path, script, tmp_path):
    line = line_of(script, "LINE_TANH")
    return [
        ("ls", path), ("ls", path, "--json"), ("show", path), ("show", path, "--uids", "--pass", "0"),
        ("lineage", path, "--source", f"{os.path.basename(script)}:{line}"),
        ("lineage", path, "--source", f"{os.path.basename(script)}:{line}", "--json"),
        ("diff", path, "--chain", "forward"), ("diff", path, path),
        ("dot", path, "-o", tmp_path / "g.dot"),
        ("export", path, "--perfetto", tmp_path / "p.json"),  # exit 2: not profiled; still no torch
        ("source", path, os.path.basename(script)), ("source", path, script, "--json"),
        ("--help",), ("ls", "--help"),
    ]


def test_reading_commands_import_neither_torch_nor_triton(recorded, tmp_path):
    path, script = recorded
    for argv in _commands(path, script, tmp_path):
        r = _probe(*argv)
        assert r["heavy"] == [], (argv, r["heavy"])
        assert r["code"] in (0, 2) if argv[0] == "export" else r["code"] == 0, (argv, r)


def test_torch_free_trace_text_matches_the_torch_one(recorded, capsys):
    """Traces loaded without torch (dtype/device stand-ins) print exactly as with torch."""
    from thundervis.recording import open_recording
    path, _ = recorded
    with open_recording(path) as rec:
        uid = next(s.uid for s in rec.symbols(0, "forward", 0) if s.sym != "del")
    for argv in (("show", path, "--uids", "--pass", "0"), ("show", path, "--chain", "backward", "--uids"),
                 ("lineage", path, "--uid", uid, "--json"), ("diff", path, "--chain", "backward", "--to", "decompose"),
                 ("diff", path, path, "--json")):
        code, with_torch, _ = run_cli(capsys, *argv)
        r = _probe(*argv)
        assert (r["code"], r["out"]) == (0, with_torch), argv


def test_library_modules_import_without_torch():
    code = ("import sys, thundervis, thundervis.recording, thundervis.diff, thundervis.dot, thundervis.safe_text, "
            "thundervis.compiler.ir, thundervis.compiler.printer, thundervis.compiler.serialize, "
            "thundervis.compiler.values\n"
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@pytest.mark.parametrize("entry", [
    "import thundervis; thundervis.jit",
    "import thundervis.compiler.backend",
    "from thundervis.compiler import ThundervisCompiler",
])
def test_compiling_entry_points_set_triton_interpret_before_triton(entry):
    import torch
    if torch.cuda.is_available():
        pytest.skip("with CUDA Triton compiles for real; the flag stays unset")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = entry + "\nimport os, sys\nimport triton\nprint(os.environ.get('TRITON_INTERPRET'), 'torch' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    flag, has_torch = p.stdout.split()
    assert (flag, has_torch) == ("1", "True")


def test_torch_free_name_tables_are_torchs():
    """Where torch is not imported, recorded dtype/layout/memory-format names are checked against
    fixed name tables: they must be exactly the names torch defines (else a recording would read
    differently with and without torch)."""
    import torch  # noqa: F401
    from thundervis.compiler import values
    tables = values._torch_tables()
    assert values._DTYPE_NAMES == set(tables["DTYPES"])
    assert values._LAYOUT_NAMES == set(tables["LAYOUTS"])
    assert values._MEMORY_FORMAT_NAMES == set(tables["MEMORY_FORMATS"])


def test_version_names_the_installed_packages_without_importing_them():
    """``thundervis --version``: one line with the versions a bug report needs, exit 0, no torch."""
    import platform
    from importlib.metadata import version
    r = _probe("--version")
    assert (r["code"], r["heavy"]) == (0, [])
    assert r["out"] == (f"thundervis {version('thundervis')} (Python {platform.python_version()}, "
                        f"torch {version('torch')}, triton {version('triton')})\n")
