"""A Llama-3 decoder layer's saved bytes (docs/memory.md): the analytic count of
benchmarks/memory_block_llama.py equals eager autograd's (saved_tensors_hooks) and the ledger's,
with each remat policy, on a small config that really runs."""
from __future__ import annotations

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")


def _bench():
    sys.path.insert(0, BENCH)
    try:
        import memory_block_llama
    finally:
        sys.path.remove(BENCH)
    return memory_block_llama


def test_formula_terms_add_up_to_the_closed_forms():
    m = _bench()
    h, ffn, a, a_kv, s, b = 4096, 14336, 32, 8, 4096, 1
    f = m.formula(h, ffn, a, a_kv, s, b)
    sbh, d = s * b * h, h // a
    assert sum(f["off"].values()) == 20 * sbh + 4 * s * b * a_kv * d + 8 * s * b * ffn + 4 * a * s * b + 8 * s * b
    assert sum(f["auto"].values()) == 8 * sbh + 4 * s * b * a_kv * d + 4 * s * b * ffn + 4 * a * s * b + 8 * s * b
    assert round(sum(f["off"].values()) / sbh, 3) == 49.033  # the figure docs/memory.md gives for the 8B


@pytest.mark.slow
def test_small_llama_layer_formula_equals_hooks_and_ledger():
    m = _bench()
    r = m.measure("small")
    h, ffn, a, a_kv, s, b = r["dims"]
    f = m.formula(h, ffn, a, a_kv, s, b)
    assert r["hooks"][1] == sum(f["off"].values())  # eager autograd keeps exactly the derived terms
    for remat in ("off", "auto"):  # layer 1: layer 0 also holds the cos/sin every layer shares
        assert m.layer_bytes(r[remat], 1) == sum(f[remat].values()), remat
    assert r["off"].saved_bytes == sum(r["hooks"].values())  # and the whole step, as the hooks count it
