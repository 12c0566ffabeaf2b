"""The roofline model: bytes and FLOPs of hand-computed kernels and torch ops, the GPU table against
docs/targets.md, roofline µs, and what ``ls`` / ``ls --json`` print."""
from __future__ import annotations

import json
import os
import re

import pytest

from thundervis.compiler.ir import BoundSymbol, TensorProxy, Trace
from thundervis.gpus import GPUS, UnknownGPU, gpu_for
from thundervis.compiler.roofline_cost import Cost, addressed_elements, fusion_cost, op_cost, trace_costs

from core_helpers import run_cli
from roofline_fixtures import FUSION, MM, roofline_recording

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "targets.md")


def P(name, shape, strides=None, dtype="float32"):
    """A proxy; strides default to row-major."""
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    return TensorProxy(name, tuple(shape), dtype, "cuda:0", tuple(strides))


def fusion(name, inputs, members, outputs, uid="f90"):
    return BoundSymbol(name, tuple(inputs), {}, tuple(outputs), uid, subsymbols=tuple(members), fusion=True,
                       executor="triton")


def S(sym, args, out, uid, **kwargs):
    return BoundSymbol(sym, tuple(args), kwargs, out, uid)


# ------------------------------------------------------------------------------ bytes, FLOPs

def test_a_broadcast_input_of_stride_0_is_read_once():
    a = P("a", (64, 128))
    b = P("b", (64, 128), (0, 1))  # a bias broadcast over rows: 128 distinct elements
    t0, t1 = P("t0", (64, 128)), P("t1", (64, 128))
    k = fusion("fw_fusion_0", [a, b], [S("prims.add", (a, b), t0, "f1"), S("prims.tanh", (t0,), t1, "f2")], [t1])
    c = fusion_cost(k)
    assert addressed_elements((64, 128), (0, 1)) == 128
    assert c.bytes_read == 64 * 128 * 4 + 128 * 4
    assert c.bytes_written == 64 * 128 * 4  # t0 stays on chip
    assert c.flops == 2 * 64 * 128  # add + tanh, one per output element each
    assert c.kind == "fusion" and c.precision == "fp32"


def test_a_broadcast_inside_the_region_reads_the_small_input_once():
    x, b = P("x", (32, 16)), P("b", (16,))
    be, y = P("be", (32, 16), (0, 1)), P("y", (32, 16))
    k = fusion("fw_fusion_1", [x, b], [S("prims.expand", (b, (32, 16)), be, "f1"), S("prims.mul", (x, be), y, "f2")], [y])
    c = fusion_cost(k)
    assert c.bytes_read == (32 * 16 + 16) * 4 and c.flops == 32 * 16


def test_a_reduction_counts_one_flop_per_input_element():
    x = P("x", (8, 1024), dtype="bfloat16")
    s, m = P("s", (8,)), P("m", (8,))
    k = fusion("fw_fusion_2", [x], [S("prims.sum", (x, [1]), s, "f1"), S("prims.mean", (x, [1]), m, "f2")], [s, m])
    c = fusion_cost(k)
    assert c.bytes_read == 8 * 1024 * 2  # read once though two members use it
    assert c.bytes_written == 2 * 8 * 4
    assert c.flops == 8 * 1024 + (8 * 1024 + 8)
    var = fusion("fw_fusion_3", [x], [S("prims.var", (x, [1]), s, "f1")], [s])
    assert fusion_cost(var).flops == 3 * 8 * 1024


def test_strided_and_sliced_inputs():
    xt = P("xt", (128, 64), (1, 128))  # a transposed view: every element once
    w = P("w", (1000, 64))
    ws, y = P("ws", (10, 64)), P("y", (10, 64))
    k = fusion("fw_fusion_4", [w], [S("prims.slice", (w, [0, 0], [10, 64]), ws, "f1"),
                                    S("prims.neg", (ws,), y, "f2")], [y])
    assert fusion_cost(k).bytes_read == 10 * 64 * 4  # only the slice is read
    k2 = fusion("fw_fusion_5", [xt], [S("prims.exp", (xt,), P("e", (128, 64)), "f1")], [P("e", (128, 64))])
    assert fusion_cost(k2).bytes_read == 128 * 64 * 4


def test_an_embedding_reads_the_rows_it_gathers_at_most_the_table():
    table, idx = P("table", (50000, 64)), P("idx", (4, 8), dtype="int64")
    out = P("out", (4, 8, 64))
    k = fusion("fw_fusion_6", [table, idx], [S("aten.embedding.default", (table, idx), out, "f1")], [out])
    c = fusion_cost(k)
    assert c.bytes_read == 4 * 8 * 64 * 4 + 4 * 8 * 8 and c.flops == 0
    small = P("small", (10, 64))
    k2 = fusion("fw_fusion_7", [small, idx], [S("aten.embedding.default", (small, idx), out, "f1")], [out])
    assert fusion_cost(k2).bytes_read == 10 * 64 * 4 + 4 * 8 * 8


def test_matmul_flops_and_precision():
    a, b = P("a", (256, 512), dtype="bfloat16"), P("b", (512, 1024), (1, 512), dtype="bfloat16")
    c = op_cost(S("prims.mm", (a, b), P("c", (256, 1024), dtype="bfloat16"), "f1"))
    assert c.kind == "matmul" and c.flops == 2 * 256 * 512 * 1024 and c.precision == "bf16"
    assert c.bytes_read == (256 * 512 + 512 * 1024) * 2 and c.bytes_written == 256 * 1024 * 2
    x, y = P("x", (12, 64, 32)), P("y", (12, 32, 64))
    bmm = op_cost(S("prims.bmm", (x, y), P("z", (12, 64, 64)), "f2"))
    assert bmm.flops == 2 * 12 * 64 * 64 * 32 and bmm.precision == "fp32"
    bias = P("bias", (1024,), dtype="bfloat16")
    addmm = op_cost(S("aten.addmm.default", (bias, a, b), P("o", (256, 1024), dtype="bfloat16"), "f3"))
    assert addmm.flops == 2 * 256 * 512 * 1024 + 256 * 1024
    f8 = op_cost(S("prims.mm", (P("p", (16, 16), dtype="float8_e4m3fn"), P("q", (16, 16), dtype="float8_e4m3fn")),
                   P("r", (16, 16), dtype="bfloat16"), "f4"))
    assert f8.precision == "fp8"
    # A Llama-7B projection (seq 2048, hidden 4096, bf16) is compute-bound on H100: 68.7 GFLOP at
    # 989.5 TFLOP/s (69.4 µs) against 67 MB at 3.35 TB/s (20 µs).
    x, w = P("x", (2048, 4096), dtype="bfloat16"), P("w", (4096, 4096), (1, 4096), dtype="bfloat16")
    proj = op_cost(S("prims.mm", (x, w), P("y", (2048, 4096), dtype="bfloat16"), "f5"))
    h = GPUS["h100"]
    assert proj.bound(h) == "compute" and proj.roofline_us(h) == pytest.approx(2 * 2048 * 4096 * 4096 / 989.5e12 * 1e6)
    assert proj.memory_us(h) == pytest.approx((2048 * 4096 * 2 + 4096 * 4096) * 2 / 3350e9 * 1e6)


def test_attention_flops_forward_backward_causal():
    q = P("q", (2, 8, 128, 64), dtype="bfloat16")
    k, v = P("k", (2, 8, 256, 64), dtype="bfloat16"), P("v", (2, 8, 256, 64), dtype="bfloat16")
    o = P("o", (2, 8, 128, 64), dtype="bfloat16")
    fwd = op_cost(S("aten._scaled_dot_product_flash_attention.default", (q, k, v, 0.0, False), (o,), "f1"))
    full = 2 * 2 * 8 * 128 * 256 * (64 + 64)
    assert fwd.kind == "attention" and fwd.flops == full and fwd.precision == "bf16"
    causal = op_cost(S("aten._scaled_dot_product_flash_attention.default", (q, k, v, 0.0, True), (o,), "f2"))
    assert causal.flops == full // 2
    g = P("g", (2, 8, 128, 64), dtype="bfloat16")
    outs = (P("dq", q.shape, dtype="bfloat16"), P("dk", k.shape, dtype="bfloat16"), P("dv", v.shape, dtype="bfloat16"))
    bwd = op_cost(S("aten._scaled_dot_product_flash_attention_backward.default", (g, q, k, v, o), outs, "b1"))
    assert bwd.flops == int(full * 2.5) and bwd.precision == "bf16"
    lse = P("lse", (2, 8, 128))
    cpu_bwd = op_cost(S("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
                        (g, q, k, v, o, lse, 0.0, True), outs, "b2"))
    assert cpu_bwd.flops == int(full // 2 * 2.5)
    kw = op_cost(S("aten._scaled_dot_product_efficient_attention.default", (q, k, v, None, False), (o,), "f3",
                   is_causal=True))
    assert kw.flops == full // 2


def test_views_move_nothing_and_del_is_no_op():
    x = P("x", (4, 4))
    assert op_cost(S("prims.permute", (x, [1, 0]), P("y", (4, 4), (1, 4)), "f1")).bytes == 0
    assert op_cost(S("del", (x,), None, "f2")) is None
    tr = Trace("forward", (x,), (S("prims.exp", (x,), P("e", (4, 4)), "f3"),), (P("e", (4, 4)),))
    [c] = trace_costs(tr)
    assert c.kind == "op" and c.bytes == 2 * 16 * 4 and c.flops == 16


# ---------------------------------------------------------------------------------- the table

def _docs_table() -> dict:
    """The rows of docs/targets.md's "GPU table" section (the page has other tables keyed the same)."""
    rows = {}
    with open(DOCS, encoding="utf-8") as f:
        section = f.read().split("## GPU table\n", 1)[1].split("\n## ", 1)[0]
        for line in section.splitlines():
            m = re.match(r"\| `(\w+)` \|", line)
            if m:
                rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def _num(text: str):
    m = re.match(r"[\d,.]+", text)
    return float(m.group(0).replace(",", "")) if m else None


def test_the_gpu_table_matches_the_cited_docs():
    rows = _docs_table()
    assert set(rows) == set(GPUS) == {"a100", "h100", "h200", "b200"}
    for key, g in GPUS.items():
        _, name, arch, bw, fp32, bf16, fp8, sms, regs, smem = rows[key]
        assert (name, arch) == (g.name.replace(" (HGX)", " (HGX B200)"), g.arch)
        assert _num(bw) * 1e9 == pytest.approx(g.hbm_bytes_per_s)
        assert _num(fp32) * 1e12 == pytest.approx(g.fp32_flops)
        assert _num(bf16) * 1e12 == pytest.approx(g.bf16_flops)
        assert (_num(fp8) * 1e12 if _num(fp8) else None) == (pytest.approx(g.fp8_flops) if g.fp8_flops else None)
        assert (_num(sms), _num(regs), _num(smem) * 1024) == (g.sms, g.registers_per_sm, g.shared_bytes_per_sm)
    # The datasheets' own figures (dense = half the "with sparsity" figures they print).
    h100 = GPUS["h100"]
    assert (h100.hbm_bytes_per_s, h100.fp32_flops, h100.bf16_flops * 2, h100.fp8_flops * 2, h100.sms) == \
        (3.35e12, 67e12, 1979e12, 3958e12, 132)
    a100 = GPUS["a100"]
    assert (a100.hbm_bytes_per_s, a100.fp32_flops, a100.bf16_flops, a100.fp8_flops, a100.sms) == \
        (2.039e12, 19.5e12, 312e12, None, 108)
    assert GPUS["h200"].hbm_bytes_per_s == 4.8e12 and GPUS["b200"].bf16_flops * 2 == 4.5e15


def test_targets_map_to_gpus():
    assert gpu_for("sm_80").key == "a100" and gpu_for("sm_90").key == "h100" and gpu_for("sm_100").key == "b200"
    assert gpu_for("90").key == "h100" and gpu_for("h200").arch == "sm_90" and gpu_for("sm_90:h200").key == "h200"
    for bad in ("sm_75", "sm_80:h200", "tpu"):
        with pytest.raises(UnknownGPU, match="choices"):
            gpu_for(bad)


def test_roofline_us_is_the_larger_of_memory_and_compute():
    h = GPUS["h100"]
    mem = Cost("k", "f1", "fusion", 3_350_000, 0, 10)  # 3.35 MB at 3.35 TB/s: 1 µs
    assert mem.roofline_us(h) == pytest.approx(1.0) and mem.bound(h) == "memory"
    comp = Cost("m", "f2", "matmul", 1000, 0, int(989.5e6 * 4), "bf16")  # 4 µs at 989.5 TFLOP/s
    assert comp.roofline_us(h) == pytest.approx(4.0) and comp.bound(h) == "compute"
    f64 = Cost("d", "f3", "matmul", 3_350_000, 0, 10**15, "fp64")  # no FP64 peak: memory term only
    assert f64.roofline_us(h) == pytest.approx(1.0)


# ----------------------------------------------------------------------------------- ls output

MM = (2 * 64 * 128 * 256, (64 * 128 + 128 * 256) * 4, 64 * 256 * 4)  # flops, read, written
FUSION = (2 * 64 * 256, (64 * 256 + 256) * 4, 64 * 256 * 4)


def test_ls_prints_the_modelled_step_time(tmp_path, capsys):
    path = roofline_recording(str(tmp_path / "r.tvrec"))
    h = GPUS["h100"]
    expect = max((MM[1] + MM[2]) / h.hbm_bytes_per_s, MM[0] / h.fp32_flops) * 1e6 + \
        max((FUSION[1] + FUSION[2]) / h.hbm_bytes_per_s, FUSION[0] / h.fp32_flops) * 1e6
    code, out, _ = run_cli(capsys, "ls", "--brief", path)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("modelled step"))
    assert f"sm_90 H100 SXM  {expect:.3g} µs" in line and "no target recorded: sm_90 assumed" in line
    assert "1 kernel and 1 torch op," in line
    code, out, _ = run_cli(capsys, "ls", "--brief", "--gpu", "sm_80,h200", path)
    lines = [x for x in out.splitlines() if x.startswith("modelled step")]
    assert len(lines) == 2 and "A100 80GB SXM" in lines[0] and "H200 SXM" in lines[1] and "assumed" not in out
    code, _, err = run_cli(capsys, "ls", "--gpu", "v100", path)
    assert code == 2 and "no GPU for 'v100'" in err and "Traceback" not in err


def test_ls_json_has_roofline_per_fusion_and_the_step(tmp_path, capsys):
    path = roofline_recording(str(tmp_path / "r.tvrec"))
    code, out, _ = run_cli(capsys, "ls", "--json", "--gpu", "sm_80,sm_90,sm_100", path)
    d = json.loads(out)
    assert code == 0 and set(d["modelled_step"]) == {"sm_80", "sm_90", "sm_100"}
    [k] = d["graphs"][0]["fusions"]
    assert k["roofline"]["flops"] == FUSION[0] and k["roofline"]["bytes_read"] == FUSION[1]
    assert k["roofline"]["bytes_written"] == FUSION[2]
    for t, key in (("sm_80", "a100"), ("sm_90", "h100"), ("sm_100", "b200")):
        g = GPUS[key]
        want = (FUSION[1] + FUSION[2]) / g.hbm_bytes_per_s * 1e6
        assert k["targets"][t]["roofline_us"] == pytest.approx(want) and k["targets"][t]["bound"] == "memory"
    step = d["modelled_step"]["sm_90"]
    assert step["gpu"] == "H100 SXM" and step["kernels"] == 1 and step["torch_ops"] == 1 and not step["assumed"]
    assert [c["chain"] for c in step["chains"]] == ["forward"]
    mm, fus = d["roofline"]
    assert (mm["name"], mm["kind"], mm["flops"], mm["target"], mm["gpu"]) == ("prims.mm", "matmul", MM[0], "sm_80",
                                                                               "A100 80GB SXM")
    assert (fus["name"], fus["bytes_read"], fus["pct_of_roofline"]) == ("fw_fusion_0", FUSION[1], None)


def test_rows_compare_with_measured_time_only_on_a_gpu(tmp_path):
    from thundervis.present.roofline import roofline_rows
    from thundervis.recording import open_recording
    path = roofline_recording(str(tmp_path / "r.tvrec"))
    with open_recording(path) as rec:
        rows = roofline_rows(rec, "h100")
    assert [(r.name, r.kind) for r in rows] == [("prims.mm", "matmul"), ("fw_fusion_0", "fusion")]
    assert rows[1].kernel_id is not None and rows[1].flops == FUSION[0]
    assert all(r.pct_of_roofline is None and r.measured_us is None for r in rows)
    h = GPUS["h100"]
    for clock, pct in (("device", True), ("host", False)):
        path = roofline_recording(str(tmp_path / f"{clock}.tvrec"), clock, fusion_us=5.0, mm_us=8.0)
        with open_recording(path) as rec:
            mm, fus = roofline_rows(rec, "sm_90")
        assert (mm.measured_us, fus.measured_us, fus.clock) == (8.0, 5.0, clock)
        if pct:
            roof = (FUSION[1] + FUSION[2]) / h.hbm_bytes_per_s * 1e6
            assert fus.pct_of_roofline == pytest.approx(roof / 5.0 * 100) and mm.pct_of_roofline is not None
        else:  # a CPU time is never compared with a GPU roofline
            assert fus.pct_of_roofline is None and mm.pct_of_roofline is None


def test_a_real_recording_models_every_chain_of_every_graph(recorded, capsys):
    """The torch-executor run of a Linear + tanh model, two graphs (a recompile): the step sums
    forward and backward of both, and the addmm/mm of the linear layer are costed as matmuls."""
    path, _ = recorded
    code, out, _ = run_cli(capsys, "ls", "--json", path)
    d = json.loads(out)
    step = d["modelled_step"]["sm_90"]
    assert code == 0 and step["assumed"] and not step["left_out"]
    assert sorted((c["graph"], c["chain"]) for c in step["chains"]) == \
        [(0, "backward"), (0, "forward"), (1, "backward"), (1, "forward")]
    assert step["us"] == pytest.approx(sum(c["us"] for c in step["chains"])) and step["us"] > 0
    matmuls = [r for r in d["roofline"] if r["kind"] == "matmul"]
    assert matmuls and all(r["flops"] > 0 and r["precision"] == "fp32" for r in matmuls)
    assert all(r["pct_of_roofline"] is None for r in d["roofline"])  # timed on no GPU


def test_the_recorded_targets_are_modelled_and_merged_beside_the_builds(tmp_path, capsys):
    """A run recorded with --target sm_90: the step is modelled on sm_90 without "assumed", and the
    fusion's targets.sm_90 holds the build's resources and the roofline side by side."""
    path = roofline_recording(str(tmp_path / "b.tvrec"), build=True)
    code, out, _ = run_cli(capsys, "ls", "--json", path)
    d = json.loads(out)
    assert code == 0 and list(d["modelled_step"]) == ["sm_90"] and not d["modelled_step"]["sm_90"]["assumed"]
    t = d["graphs"][0]["fusions"][0]["targets"]["sm_90"]
    assert t["registers"] == 32 and t["status"] == "ok" and t["roofline_us"] > 0 and t["bound"] == "memory"
    code, out, _ = run_cli(capsys, "ls", "--brief", path)
    assert "sm_90: 32 regs · 0 spills" in out and "modelled step  sm_90 H100 SXM" in out and "assumed" not in out


def test_recorded_targets_outside_the_table_say_so(tmp_path, capsys):
    path = roofline_recording(str(tmp_path / "a.tvrec"), targets=["sm_89"])
    code, out, _ = run_cli(capsys, "ls", "--brief", path)
    line = next(x for x in out.splitlines() if x.startswith("modelled step"))
    assert "recorded targets sm_89 are not in the GPU table: sm_90 assumed" in line


def test_costs_are_stored_with_the_final_pass_and_old_recordings_cost_their_traces(tmp_path, capsys, recorded):
    """The writer stores each final pass's costs (symbol_costs); ls reads them without the trace,
    and a recording without the table (written before it) gives the same document."""
    import sqlite3
    from thundervis.compiler.roofline_cost import trace_costs
    from thundervis.recording import open_recording
    path, _ = recorded
    with open_recording(path) as rec:
        stored = rec.roofline_costs()
        assert sorted(stored) == [(0, "backward"), (0, "forward"), (1, "backward"), (1, "forward")]
        for (g, chain), costs in stored.items():
            assert costs == trace_costs(rec.pass_trace(rec.graph(g).chain(chain).last))
    one = roofline_recording(str(tmp_path / "new.tvrec"))
    old = roofline_recording(str(tmp_path / "old.tvrec"))
    with sqlite3.connect(old) as conn:
        conn.execute("DROP TABLE symbol_costs")
    conn.close()
    with open_recording(old) as rec:
        assert rec.roofline_costs() == {}
    docs = []
    for p in (one, old):
        code, out, _ = run_cli(capsys, "ls", "--json", p)
        d = json.loads(out)
        docs.append((d["modelled_step"], d["roofline"], d["graphs"][0]["fusions"][0]["targets"]))
    assert code == 0 and docs[0] == docs[1]
