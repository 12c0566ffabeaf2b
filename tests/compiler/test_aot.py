"""Ahead-of-time compilation for GPU targets (compiler/aot): targets and occupancy, the stage
parsers, GPU plans (grid over the data, phases as launches, numerics under the interpreter), and
real builds in worker processes: deduplicated, failures recorded, never raising."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from thundervis.compiler import CompileObserver
from thundervis.compiler.aot import machine_code as mc
from thundervis.compiler.aot.plan import job, plan_for_gpu, region_members
from thundervis.compiler.aot.pool import PTXAS_TEST_HOOK, AheadOfTime
from thundervis.compiler.aot.targets import TargetError, occupancy, parse_targets
from thundervis.compiler.backend import ThundervisCompiler, reset_graph_ids
from thundervis.compiler.interpreter import run_trace


class Kernels(CompileObserver):
    """Keeps every kernel record and every AOT build it is told about."""

    def __init__(self):
        self.records, self.builds = [], []

    def kernels_built(self, graph, chain, kernels):
        self.records += [(graph, chain, k) for k in kernels]

    def kernel_compiled(self, graph, chain, kernel, target, build):
        self.builds.append((graph, chain, kernel, target, build))


def triton_records(fn, *args):
    """Compile ``fn`` with the triton executor (no targets), call it once, return its Triton kernel records."""
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Kernels()
    compiled = torch.compile(fn, backend=ThundervisCompiler(executors=["triton"], observer=obs))
    compiled(*args)
    return [k for _, _, k in obs.records if k.executor == "triton"]


# ------------------------------------------------------------------------------ targets

def test_targets_parse_and_refuse():
    assert parse_targets("sm_80,sm_90") == (80, 90)
    assert parse_targets(" sm90 , 90, sm_90a") == (90,)
    with pytest.raises(TargetError, match="unknown GPU target 'sm_42'"):
        parse_targets("sm_42")


def test_occupancy_from_registers_shared_and_warps():
    # 64 registers x 32 threads = 2048 per warp: 32 warps fit, 4 blocks of 8 warps = 50% of 64.
    assert occupancy(90, 64, 1536, 8) == {"blocks_per_sm": 4, "active_warps": 32, "max_warps": 64,
                                           "occupancy": 0.5, "limited_by": "registers"}
    # 255 registers round up to 8192 per warp: 8 warps, two blocks of 4.
    assert occupancy(80, 255, 0, 4)["occupancy"] == 0.125
    # shared memory limits: 100 KiB per block on sm_90 (228 KiB per SM, 1 KiB reserved each) -> 2 blocks.
    o = occupancy(90, 16, 100 * 1024, 4)
    assert (o["blocks_per_sm"], o["limited_by"]) == (2, "shared")
    # sm_86 has 48 warps per SM: 12 blocks of 4 warps at most.
    assert occupancy(86, 16, 0, 4)["occupancy"] == 1.0 and occupancy(86, 16, 0, 4)["active_warps"] == 48


# ------------------------------------------------------------------------------ stage parsers

def test_line_maps_follow_inlining_to_the_kernel_line():
    f = "/tmp/k.py"
    ttir = "\n".join(['%0 = tt.load %p loc(#loc3)', '%1 = math.exp %0 loc(#loc5)', '%2 = arith.addf loc(#loc9)',
                      '#loc1 = loc("/tmp/k.py":10:9)', '#loc2 = loc("/lib/standard.py":50:3)',
                      '#loc3 = loc("x"(#loc1))', '#loc4 = loc("/tmp/k.py":11:4)',
                      '#loc5 = loc(callsite(#loc2 at #loc4))', '#loc9 = loc(unknown)'])
    assert mc.mlir_lines(ttir, f) == [10, 11, 0, 0, 0, 0, 0, 0, 0]
    llir = "\n".join(["%a = fadd float %b, %c, !dbg !7", "%d = call float @exp(), !dbg !8",
                      "!7 = !DILocation(line: 12, column: 3, scope: !4)",
                      "!8 = !DILocation(line: 50, column: 1, scope: !9, inlinedAt: !10)",
                      "!10 = !DILocation(line: 13, column: 2, scope: !4)"])
    assert mc.llir_lines(llir, f)[:2] == [12, 13]
    ptx = "\n".join(['.file 1 "/tmp/k.py"', '.file 2 "/lib/standard.py"', ".loc 1 6 0", "mov.u32 %r1, 0;",
                     ".loc 2 50 21, function_name $L__info_string0, inlined_at 1 11 16", "ex2.approx.f32 %f1, %f2;",
                     ".loc 2 287 12, function_name $L__info_string0, inlined_at 2 314 12", "add.f32 %f3, %f1, %f1;"])
    assert mc.ptx_lines(ptx, f) == [0, 0, 6, 6, 11, 11, 11, 11]
    sass = "\n".join(['\t//## File "/tmp/k.py", line 7', "        /*0000*/                   S2R R0, SR_CTAID.X ;",
                      '\t//## File "/lib/standard.py", line 50 inlined at "/tmp/k.py", line 11',
                      "        /*0010*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;",
                      "        /*0020*/                   MUFU.EX2 R8, R7 ;",
                      "        /*0030*/                   STG.E desc[UR4][R2.64], R8 ;"])
    assert mc.sass_lines(sass, f) == [0, 7, 0, 11, 11, 11]
    mix = mc.instruction_mix(sass)
    assert (mix["instructions"], mix["global_loads"], mix["global_stores"], mix["mufu"]) == \
        (4, {"128": 1}, {"32": 1}, 1)


def test_resource_reports_parse():
    assert mc.resource_usage(" Function kernel:\n  REG:24 STACK:8 SHARED:16 LOCAL:4 CONSTANT[0]:560") == \
        {"registers": 24, "stack_bytes": 8, "static_shared_bytes": 16, "local_bytes": 4}
    log = ("ptxas info    : Function properties for kernel\n    8 bytes stack frame, 12 bytes spill stores, "
           "12 bytes spill loads\nptxas info    : Used 255 registers, used 1 barriers")
    assert mc.ptxas_report(log) == {"registers": 255, "stack_frame_bytes": 8, "spill_store_bytes": 12,
                                    "spill_load_bytes": 12}


# ------------------------------------------------------------------------------ GPU plans

def _softmax_colsum(x):
    return torch.softmax(x, -1).sum(0) * 2.0


def test_gpu_plan_spreads_over_blocks():
    """A pointwise region of 2^20 elements gets a 1024-program grid for the GPU, while the CPU plan
    (interpreter-sized tiles) runs 16; a region of dependent phases larger than a block becomes one
    launch per phase, each with its own grid, never one program walking every block."""
    (pw,) = triton_records(lambda x: torch.tanh(x) * x + 1.0, torch.randn(1 << 20))
    assert pw.details["grid"] == 16
    plan = plan_for_gpu(pw)
    assert plan.kernel.plan == "single" and plan.kernel.grid == 1024
    (ph,) = triton_records(_softmax_colsum, torch.randn(256, 128))
    assert ph.details["plan"] == "phases" and ph.details["grid"] == 1
    gpu = plan_for_gpu(ph).kernel
    assert gpu.plan == "launches" and len(gpu.kernels) >= 2
    assert max(k.grid for k in gpu.kernels) > 1
    # every line of the compiled text generated for an op names a member of the region
    members, _ = region_members(ph)
    uids = {b.uid for b in members}
    assert plan_for_gpu(ph).line_uids and set(plan_for_gpu(ph).line_uids.values()) <= uids


@pytest.mark.parametrize("fn, shape, looped", [
    (_softmax_colsum, (256, 128), False),
    (lambda x: (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, keepdim=True) + 1e-5), (512, 96), False),
    (lambda x: torch.sigmoid(x) * x, (3, 1000, 7), False),
    (lambda x: torch.nn.functional.pad(x, (1, 2, 0, 3), value=0.5) * 2, (3, 100, 7), False),
    # rows longer than one GPU block: looped reductions (sum, max with NaN propagation, var, outer sums)
    (lambda x: torch.softmax(x, -1), (4, 10000), True),
    (lambda x: torch.nn.functional.layer_norm(x, (8192,)), (2, 8192), True),
    (lambda x: x.var(-1, correction=0) + x.amin(-1), (3, 7000), True),
    (lambda x: x.sum(0) * 2.0, (20000, 8), True),
    (lambda x: (x.sum((0, 2)), x.mean(1) * 2), (64, 8, 200), True),  # dims apart, read permuted
    (lambda x: x.amax(1), (16, 300, 8), False),
    (lambda x: ((x > 3.0).any(-1), (x > -3.5).all(-1), x.any(-1)), (4, 10000), True),
    (lambda x: (x.argmax(-1), x.argmin(-1, keepdim=True)), (4, 10000), True),
    (lambda x: x.argmax(1), (16, 300, 8), False),  # a middle dim, read permuted
    (lambda x: torch.zeros(40, 7).scatter_add(0, (x.abs() * 10).long() % 40, x * 2), (300, 7), False),
    # a whole tensor to one value: split over 16 programs, then the partial results reduced
    (lambda x: (x * x).sum() * 0.5, (64, 1000), "split"),
    (lambda x: x.abs().amax(), (60000,), "split"),
    (lambda x: (x > 4.0).any(), (60000,), "split"),
    (lambda x: (x > -4.0).all(), (64, 1000), "split"),
    (lambda x: torch.nn.functional.mse_loss(x, torch.zeros_like(x)) + 1.0, (64, 1000), "split"),  # mean
    (lambda x: (torch.tanh(x), x.sum(dim=(0, 1), keepdim=True) + 1), (128, 400), "split"),
])
def test_gpu_plan_computes_what_torch_does(fn, shape, looped, tmp_path):
    """The GPU plan's module, run by Triton's interpreter on CPU tensors, matches the region's
    reference, looped and split reductions included."""
    x = torch.randn(*shape)
    (rec,) = triton_records(fn, x)
    ks = plan_for_gpu(rec).kernel
    if looped == "split":
        assert ks.plan == "launches" and [k.grid for k in ks.kernels] == [16, 1] and ks.grid == 16
    else:
        assert ("looped in chunks" in ks.source) == looped
    _gpu_plan_matches_reference(rec, ks, tmp_path)


def _load_gpu_plan(ks, tmp_path):
    """Import the GPU plan's module (its ``launch`` runs under Triton's interpreter here)."""
    path = tmp_path / "gpu_plan.py"
    path.write_text(ks.source)
    spec = importlib.util.spec_from_file_location("gpu_plan_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gpu_plan_matches_reference(rec, ks, tmp_path) -> None:
    """Run the GPU plan ``ks`` of kernel record ``rec`` on random inputs and compare it with the
    region run by the reference interpreter."""
    inputs = [torch.randn(p.shape, dtype=torch.float32) for p in rec.region.inputs]
    got = _load_gpu_plan(ks, tmp_path).launch(*inputs)
    want = run_trace(rec.region.replace(symbols=tuple(b for b in rec.region.symbols if b.sym != "del")), list(inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4 * max(1.0, w.double().abs().max().item()))


def test_gpu_plan_of_computed_values_reduced_over_dims_apart_runs_looped_in_their_frame(tmp_path):
    """BatchNorm's backward shape of work with rows longer than a block: one kernel, looped over
    the permuted rows, matching the region's reference."""
    from test_triton_ops import _bn_backward_like
    x, g, mean = torch.randn(8, 3, 40, 40), torch.randn(8, 3, 40, 40), torch.randn(1, 3, 1, 1)
    (rec,) = triton_records(_bn_backward_like, x, g, mean)
    assert "iterates in its reductions' frame, dims in the order [1, 0, 2, 3]" in rec.note  # said where people read
    ks = plan_for_gpu(rec).kernel
    assert "looped in chunks" in ks.source and ks.plan == "single"
    _gpu_plan_matches_reference(rec, ks, tmp_path)


@pytest.mark.parametrize("fn, shapes", [
    (lambda x: (x.sum((0, 2)), x.mean(1) * 2), [(64, 8, 200)]),  # dims apart of an input: a permute inserted
    ("bn", [(8, 3, 40, 40), (8, 3, 40, 40), (1, 3, 1, 1)]),      # the permuted frame: permutes and views inserted
])
def test_each_line_of_a_rewritten_region_names_the_op_it_was_generated_for(fn, shapes):
    """The plans insert symbols (permutes, views) before generating; a line must still name its
    own op (the asm panel's line <-> op links), not the one at the same position in the region."""
    from test_triton_ops import _bn_backward_like
    (rec,) = triton_records(_bn_backward_like if fn == "bn" else fn, *[torch.randn(s) for s in shapes])
    plan = plan_for_gpu(rec)
    lines = plan.kernel.jit_source.splitlines()
    sums = [plan.members[uid]["sym"] for n, uid in plan.line_uids.items() if "tl.sum(" in lines[n - 1]]
    assert sums and all(s.split(".")[-1] in ("sum", "mean", "var") for s in sums), sums
    assert len(plan.line_uids) >= 10


def test_looped_argmax_keeps_the_first_index_and_the_first_nan_across_chunks(tmp_path):
    """Rows longer than a block: a tie in a later chunk keeps the earlier index, a row of -inf
    and a row of NaN still get an index, and a NaN anywhere wins (torch's rule)."""
    x = torch.randn(5, 10000)
    x[0, 9000] = x[0, 20] = 50.0          # tie across chunks: the first one
    x[1, :] = float("-inf")                # nothing above the start value
    x[2, :] = float("nan")
    x[3, 7000] = float("nan")              # a NaN after the max
    x[3, 10] = 60.0
    x[4, 9999] = -70.0
    (rec,) = triton_records(lambda x: (x.argmax(-1), x.argmin(-1)), x)
    ks = plan_for_gpu(rec).kernel
    assert "looped in chunks" in ks.source
    got = _load_gpu_plan(ks, tmp_path).launch(x)
    assert [g.tolist() for g in got] == [x.argmax(-1).tolist(), x.argmin(-1).tolist()]
    assert got[0].tolist()[:4] == [20, 0, 0, 7000] and got[1].tolist()[2:5] == [0, 7000, 9999]


# ------------------------------------------------------------------------------ real builds

@pytest.fixture(scope="module")
def two_layer_builds():
    """Two identical layers (one distinct kernel) compiled for sm_80 and sm_90 in a worker, the
    second submitted after the first one's build is done (it is reported all the same)."""
    def layers(x, w):
        for _ in range(2):
            x = torch.tanh(x) * x + 1.0
            x = x @ w  # keeps the two regions apart
        return x
    records = triton_records(layers, torch.randn(32, 64), torch.randn(64, 64))
    obs = Kernels()
    aot = AheadOfTime((80, 90), obs, workers=1)
    aot.submit(0, "forward", records[:1])
    for _ in range(1200):  # the second layer comes after the first one's build is done
        if not aot.pending():
            break
        time.sleep(0.5)
    aot.submit(0, "forward", records[1:])
    stats = aot.finish(600)
    return records, obs.builds, stats


def test_identical_layers_share_one_build(two_layer_builds):
    records, builds, stats = two_layer_builds
    assert len(records) == 2
    assert stats["kernels"] == 2 and stats["distinct"] == 1 and stats["failed"] == 0 and stats["unfinished"] == 0
    # the timeline the wait comes from: batches handed over (the second layer's needed none), then the finish
    first, last = stats["handed_s"]
    assert 0 <= first <= last <= stats["finish_called_s"] <= stats["seconds"]
    assert sorted((k, t) for _, _, k, t, _ in builds) == sorted((r.name, t) for r in records for t in ("sm_80", "sm_90"))
    keys = {(b["build_key"], t) for *_, t, b in builds}
    assert len(keys) == 2  # one per target


def test_build_records_stages_resources_and_mix(two_layer_builds):
    _, builds, _ = two_layer_builds
    for *_, target, b in builds:
        assert b["status"] == "ok", b.get("error")
        assert set(b["stages"]) == {"ttir", "ttgir", "llir", "ptx", "sass"}
        assert f".target\t{target}" in b["stages"]["ptx"] or f".target {target}" in b["stages"]["ptx"]
        res = b["resources"]
        assert 0 < res["registers"] <= 255 and res["spills"] == 0
        assert 0 < b["occupancy"]["occupancy"] <= 1
        assert b["mix"]["global_loads"] and b["mix"]["global_stores"] and b["mix"]["mufu"] >= 1  # tanh
        for stage, text in b["stages"].items():
            lines = b["lines"][stage]
            assert len(lines) == len(text.splitlines())
            hit = {n for n in lines if n}
            assert hit and hit & set(map(int, b["line_uids"]))  # lines reach member ops


def test_ptxas_rejection_is_a_recorded_failure(monkeypatch):
    """A kernel ptxas rejects (a test-only hook passes it a bad option) is a failed build carrying
    ptxas's message; nothing raises."""
    (rec,) = triton_records(lambda x: torch.exp(x) + 1.0, torch.randn(1000))
    monkeypatch.setenv(PTXAS_TEST_HOOK, "--no-such-ptxas-option")
    obs = Kernels()
    aot = AheadOfTime((90,), obs, workers=1)
    aot.submit(3, "forward", [rec])
    stats = aot.finish(600)
    assert stats["failed"] == 1
    ((g, chain, name, target, b),) = obs.builds
    assert (g, chain, name, target, b["status"]) == (3, "forward", rec.name, "sm_90", "failed")
    assert "ptxas" in b["error"] and "no-such-ptxas-option" in b["error"]


def test_unfinished_builds_are_reported_not_waited_for():
    (rec,) = triton_records(lambda x: torch.exp(x) * 3.0, torch.randn(1000))
    obs = Kernels()
    aot = AheadOfTime((80,), obs, workers=1)
    aot.submit(0, "forward", [rec])
    stats = aot.finish(0.0)
    assert stats["unfinished"] == 1 and obs.builds[0][4]["status"] == "unfinished"
    assert aot.pending() == 0 or aot._pool is None


def test_plan_from_shapes_alone_on_meta_tensors():
    """bf16 on ``meta`` tensors: the planning executor fuses as on a CUDA device (half types
    included, which the CPU interpreter refuses) and never launches a kernel; a 40000-wide softmax
    gets a looped GPU plan."""
    from thundervis.compiler.backend import plan_records

    def step(compile, w, x):
        y = compile(lambda x, w: torch.softmax(torch.nn.functional.silu(x @ w), -1))(x, w)
        y.float().sum().backward()
    with torch.device("meta"):
        w = torch.empty(64, 40000, dtype=torch.bfloat16, requires_grad=True)
        x = torch.empty(8, 64, dtype=torch.bfloat16)
    records, failures = plan_records(step, w, x)
    assert failures == [] and records
    assert all(r.details.get("planned_only") for r in records)
    assert any(p.dtype == "bfloat16" for r in records for p in r.inputs)
    assert any("looped in chunks" in plan_for_gpu(r).kernel.source for r in records)


_COMPARE = r"""
import json, os, sys
from thundervis.compiler.aot import worker, machine_code as mc
worker.prepare_worker()
jobs = json.load(open(sys.argv[1]))
calls = []
tool = worker._tool
worker._tool = lambda args, **kw: calls.append(os.path.basename(args[0])) or tool(args, **kw)
os.environ["THUNDERVIS_CACHE_DIR"] = sys.argv[2] + "/one"
together = worker.compile_jobs(jobs)
n_together = calls.count("nvdisasm")
worker._disassembled_together = lambda *a: {}
os.environ["THUNDERVIS_CACHE_DIR"] = sys.argv[2] + "/each"
each = [worker.compile_job(j) for j in jobs]
def insns(r):
    text = r["stages"]["sass"]
    return [(mc._SASS_INSN.match(m).group(3), n) for m, n in zip(text.splitlines(), r["lines"]["sass"])
            if mc._SASS_INSN.match(m)]
print(json.dumps({"ok": [r["ok"] for r in together + each], "nvdisasm": [n_together, calls.count("nvdisasm") - n_together],
                  "same_sass": [insns(a) == insns(b) for a, b in zip(together, each)],
                  "lines_hit": [sum(1 for _, n in insns(r) if n) for r in together],
                  "same_mix": [a["mix"] == b["mix"] for a, b in zip(together, each)],
                  "same_resources": [a["resources"] == b["resources"] for a, b in zip(together, each)],
                  "same_functions": [a["functions"] == b["functions"] for a, b in zip(together, each)],
                  "ptxas": [calls.count("ptxas"), calls.count("ptxas-blackwell")]}))
"""


def test_one_disassembly_gives_what_one_per_cubin_gives(tmp_path):
    """Two kernels, one planned as several launches, compiled together for sm_90 by Triton's CUDA
    backend in a fresh process (one worker batch): Triton stops at PTX, and one ptxas, one cuobjdump
    and one nvdisasm for all their functions give each kernel the same instructions, line map,
    instruction mix, resources and per-function figures (registers, spill bytes, shared memory) as
    Triton's own ptxas and one nvdisasm per function."""
    (multi,) = triton_records(_softmax_colsum, torch.randn(256, 128))
    (single,) = triton_records(lambda x: torch.tanh(x) * x + 1.0, torch.randn(4096))
    plans = [plan_for_gpu(multi), plan_for_gpu(single)]
    assert len(plans[0].kernel.kernels) >= 2 and len(plans[1].kernel.kernels) == 1
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{**job(p, 90), "folder": str(tmp_path / "src")} for p in plans]))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    out = subprocess.run([sys.executable, "-c", _COMPARE, str(path), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    n = sum(len(p.kernel.kernels) for p in plans)
    assert got["ok"] == [True] * 4 and got["nvdisasm"] == [1, n]
    assert got["same_sass"] == [True, True] and all(got["lines_hit"])
    assert got["same_mix"] == [True, True] and got["same_resources"] == [True, True]
    assert got["same_functions"] == [True, True]
    assert sum(got["ptxas"]) == 1  # one for the batch (Triton runs its own only for a kernel built alone)


def test_finish_returns_after_every_build_of_a_batch_is_reported():
    """A chain's kernels are built as one batch whose results are reported by callbacks that run
    after ``finish``'s wait wakes: ``finish`` returns only once each of them is reported (a slow
    observer, as a recording writing compressed stages is)."""
    def three(x, w):
        a = torch.tanh(x) * 2.0
        b = torch.sigmoid(a @ w) + 1.0
        return torch.exp(b @ w) * 3.0
    records = triton_records(three, torch.randn(32, 64), torch.randn(64, 64))
    assert len(records) == 3

    class Slow(Kernels):
        def kernel_compiled(self, *args):
            time.sleep(0.3)
            super().kernel_compiled(*args)
    obs = Slow()
    aot = AheadOfTime((90,), obs, workers=1)
    aot.submit(0, "forward", records)
    stats = aot.finish(600)
    assert sorted(k for _, _, k, _, _ in obs.builds) == sorted(r.name for r in records)
    assert stats["builds"] == 3 and stats["distinct"] == 3


def test_warm_up_compiles_in_a_throwaway_cache(tmp_path):
    """A worker's warm-up compiles a small kernel to PTX in a Triton cache of its own: the user's
    stays untouched and ``TRITON_CACHE_DIR`` is as it was."""
    code = ("import os; from thundervis.compiler.aot import worker; worker.prepare_worker(); "
            "print(worker.warm_up([80, 90])); print(os.environ['TRITON_CACHE_DIR'])")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", str(tmp_path / "triton")]
    assert not (tmp_path / "triton").exists() or not any((tmp_path / "triton").iterdir())


def test_workers_yield_while_the_script_runs_and_not_once_it_has_ended():
    """Workers start at a lower priority than the script; ``finish`` (the script has ended and the
    run waits only for them) gives them the script's priority back where the OS allows it."""
    aot = AheadOfTime((90,), Kernels(), workers=1)
    try:
        pid = aot._ensure_pool().submit(os.getpid).result(timeout=120)
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + 10)
        aot._raise_workers()  # never raises, privileged or not
        if os.geteuid() != 0:
            pytest.skip("only a privileged user may raise a process's priority")
        assert os.getpriority(os.PRIO_PROCESS, pid) == mine
    finally:
        aot.finish(0.0)
