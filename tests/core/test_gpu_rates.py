"""The achievable-rate table (thundervis/gpu_rates.py) against docs/targets.md, and the modelled time
of a kernel (``Cost.modelled_us``): measured rates, GEMM wave quantization, one launch each."""
from __future__ import annotations

import os
import re

import pytest

from thundervis.compiler.ir import BoundSymbol, TensorProxy
from thundervis.compiler.roofline_cost import Cost, gemm_dims, op_cost, wave_efficiency
from thundervis.gpu_rates import GEMM_TILE, LAUNCH_US, RATES, SOURCES, rates_for
from thundervis.gpus import GPUS

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "targets.md")


def _section_table(title: str) -> dict:
    text = open(DOCS, encoding="utf-8").read()
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0].strip("`")] = cells
    return rows


def _num(cell: str):
    m = re.match(r"([\d,]+(?:\.\d+)?)", cell)
    return float(m.group(1).replace(",", "")) if m else None


def test_the_rates_match_the_cited_docs():
    rows = _section_table("Achievable rates")
    assert set(rows) == set(RATES) == set(GPUS) == set(SOURCES)
    for key, r in RATES.items():
        _, name, gemm, fp8, fwd, bwd, hbm, fp32, launch = rows[key]
        assert name == GPUS[key].name.replace(" (HGX)", " (HGX B200)")
        assert _num(gemm) * 1e12 == pytest.approx(r.gemm_bf16)
        assert (_num(fp8) * 1e12 if _num(fp8) else None) == (pytest.approx(r.gemm_fp8) if r.gemm_fp8 else None)
        assert _num(fwd) * 1e12 == pytest.approx(r.attention_fwd, rel=1e-3)
        assert _num(bwd) * 1e12 == pytest.approx(r.attention_bwd, rel=1e-3)
        assert _num(hbm) * 1e9 == pytest.approx(r.hbm_bytes_per_s)
        assert ("(datasheet)" in hbm) == (r.hbm_bytes_per_s == GPUS[key].hbm_bytes_per_s)
        assert _num(fp32) * 1e12 == pytest.approx(r.fp32_flops) and _num(launch) == r.launch_us == LAUNCH_US
        assert r.sms == GPUS[key].sms and set(SOURCES[key]) == {"gemm_bf16", "gemm_fp8", "attention", "hbm", "fp32"}
    # The published figures themselves, and never above the datasheet.
    assert (RATES["h100"].gemm_bf16, RATES["a100"].gemm_bf16, RATES["b200"].gemm_bf16) == (794.5e12, 271.2e12, 1745e12)
    assert (RATES["h100"].attention_fwd, RATES["h100"].attention_bwd) == (368e12, 310e12)
    for key, r in RATES.items():
        g = GPUS[key]
        assert r.gemm_bf16 < g.bf16_flops and r.attention_fwd < g.bf16_flops and r.hbm_bytes_per_s <= g.hbm_bytes_per_s
        assert r.gemm_fp8 is None or r.gemm_fp8 < g.fp8_flops
    assert "256" in open(DOCS, encoding="utf-8").read().split("## Achievable rates", 1)[1] and GEMM_TILE == (256, 128)


def P(name, shape, dtype="bfloat16"):
    return TensorProxy(name, tuple(shape), dtype, "cuda:0", None)


def S(sym, args, out, uid="u1"):
    return BoundSymbol(sym, tuple(args), {}, out, uid)


def test_gemm_dims_of_each_matrix_product():
    a, w = P("a", (4096, 4096)), P("w", (4096, 1024))
    assert gemm_dims(S("prims.mm", (a, w), P("o", (4096, 1024)))) == (1, 4096, 1024, 4096)
    bias = P("b", (1024,))
    assert gemm_dims(S("aten.addmm.default", (bias, a, w), P("o", (4096, 1024)))) == (1, 4096, 1024, 4096)
    x, y = P("x", (12, 64, 32)), P("y", (12, 32, 80))
    assert gemm_dims(S("prims.bmm", (x, y), P("z", (12, 64, 80)))) == (12, 64, 80, 32)
    lin = S("torch.nn.functional.linear", (P("x", (2, 8, 64)), P("w", (16, 64))), P("o", (2, 8, 16)))
    assert gemm_dims(lin) == (1, 16, 16, 64)
    assert gemm_dims(S("prims.add", (a, a), P("s", (4096, 4096)))) == ()
    c = op_cost(S("prims.mm", (a, w), P("o", (4096, 1024))))
    assert c.dims == (1, 4096, 1024, 4096) and c == Cost(c.name, c.uid, c.kind, c.bytes_read, c.bytes_written,
                                                         c.flops, c.precision)  # a stored cost (no dims) equals it


def test_wave_quantization_over_the_sms():
    # 4096 x 4096 on H100: 16 x 32 = 512 tiles of 256 x 128 on 132 SMs is 4 waves, 512/528 busy.
    assert wave_efficiency((1, 4096, 4096, 4096), 132, (256, 128)) == pytest.approx(512 / 528)
    # One tile more than the SMs: a second, nearly empty wave halves the rate.
    assert wave_efficiency((1, 256 * 133, 128, 64), 133 - 1, (256, 128)) == pytest.approx(133 / 264)
    # A partial tile: 100 x 100 uses 10000 of one tile's 32768 slots, on one SM of 132.
    assert wave_efficiency((1, 100, 100, 64), 132, (256, 128)) == pytest.approx(10000 / (132 * 32768))
    assert wave_efficiency((), 132, (256, 128)) == 1.0  # unknown shapes: no quantization


def test_modelled_us_uses_the_achievable_rates_plus_a_launch():
    h, r = GPUS["h100"], rates_for("h100")
    flops = 2 * 4096 * 4096 * 4096
    mm = Cost("prims.mm", "u", "matmul", 3 * 4096 * 4096 * 2, 0, flops, "bf16", (1, 4096, 4096, 4096))
    want = flops / (794.5e12 * 512 / 528) * 1e6 + 3.0
    assert mm.modelled_us(r) == pytest.approx(want) and mm.modelled_us(r) > mm.roofline_us(h)
    fwd = Cost("aten._scaled_dot_product_flash_attention.default", "a", "attention", 10, 0, 10**12, "bf16")
    bwd = Cost("aten._scaled_dot_product_flash_attention_backward.default", "b", "attention", 10, 0, 10**12, "bf16")
    assert fwd.modelled_us(r) == pytest.approx(1e12 / 368e12 * 1e6 + 3.0)
    assert bwd.modelled_us(r) == pytest.approx(1e12 / 310e12 * 1e6 + 3.0)
    fusion = Cost("fw_fusion_0", "f", "fusion", 3_350_000, 0, 100)  # 1 µs at the (datasheet) copy rate
    assert fusion.modelled_us(r) == pytest.approx(1.0 + 3.0)
    a100 = Cost("k", "f", "fusion", 1_536_000, 0, 1)
    assert a100.modelled_us(rates_for("a100")) == pytest.approx(1.0 + 3.0)  # 1,536 GB/s measured copy
    assert Cost("v", "v", "view", 0, 0, 0).modelled_us(r) == 0.0
    f64 = Cost("d", "d", "matmul", 3_350_000, 0, 10**15, "fp64")
    assert f64.modelled_us(r) == pytest.approx(4.0)  # no FP64 rate: the memory term and a launch
    f32 = Cost("m", "m", "matmul", 0, 0, 67 * 10**6, "fp32", (1, 256 * 132, 128, 1))
    assert f32.modelled_us(r) == pytest.approx(1.0 + 3.0)  # FP32 matmul on CUDA cores, one full wave


@pytest.mark.slow
def test_the_rates_check_skips_in_one_sentence_without_cuda():
    import subprocess
    import sys
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine measures instead (scripts/gpu_check.sh)")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gpu_rates_check.py")
    done = subprocess.run([sys.executable, script, "--quick"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.strip() == "gpu_rates_check: this machine has no CUDA device; nothing to measure."
