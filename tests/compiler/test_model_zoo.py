"""Models we did not write, trained under the real ``thundervis run`` with the default executors:
a subset of ``benchmarks/model_zoo.py`` (the whole zoo is the benchmark)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "benchmarks" / "model_zoo.py"
SUBSET = ["mistral", "resnet18"]  # a Hugging Face decoder (constants, SDPA) and torchvision's ResNet-18


@pytest.mark.slow
def test_zoo_subset_matches_eager_with_every_chain_compiled(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "zoo.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ZOO), "--models", ",".join(SUBSET), "--json", str(out),
                           "--keep", str(tmp_path / "runs"), "--timeout", "600"],
                          capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
    assert out.exists(), proc.stdout + proc.stderr
    rows = {r["model"]: r for r in json.loads(out.read_text())}
    assert set(rows) == set(SUBSET)
    for name, r in rows.items():
        assert r["error"] is None, f"{name}: {r['error']}\n{proc.stdout}"
        assert len(r["losses_compiled"]) == 2
        assert r["max_rel_diff"] <= 1e-4, f"{name}: eager {r['losses_eager']} compiled {r['losses_compiled']}"
        assert r["chains_total"] >= 2 and r["chains_compiled"] == r["chains_total"], f"{name}: {r['fallbacks']}"
        # ResNet's convolutions (and their backward) have no lowering to prims: 80% there today.
        assert r["ops_lowered"] >= 0.75 * r["ops_total"], name
        assert r["prims_fused"] > 0, name
        for reason in r["fallbacks"]:
            assert "ran eagerly" not in reason, f"{name}: {reason}"
            assert reason.strip() and ":" in reason, f"{name}: unreadable fallback reason {reason!r}"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The table names every model and says how many are green.
    assert "2 of 2 models green" in proc.stdout
    for name in SUBSET:
        assert name in proc.stdout
