"""One ``ptxas``, ``cuobjdump`` and ``nvdisasm`` per batch of kernels (``compiler/aot/sass_batch.py``):
the merged PTX, the split disassembly, ptxas report and resource usage, and how a worker's batch
is balanced (tests/compiler/test_aot.py compiles real kernels both ways)."""
from __future__ import annotations

from thundervis.compiler.aot import machine_code as mc
from thundervis.compiler.aot.pool import balanced_batches, build_cost
from thundervis.compiler.aot.sass_batch import (_declares_shared, _no_shared, merge_ptx, split_disassembly,
                                                split_ptxas_log, split_resource_usage)


def _ptx(name: str, files: list[str], decls: list[str], locs: list[str]) -> str:
    head = ".version 8.7\n.target sm_90a\n.address_size 64\n\n"
    body = f".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n$L__func_begin0:\n"
    body += "".join(f"\t{loc}\n\tmov.u32 %r1, 0;\n" for loc in locs) + "\tbra $L__BB0_1;\n$L__BB0_1:\n\tret;\n}\n"
    tail = "".join(f'\t.file\t{i + 1} "{f}"\n' for i, f in enumerate(files))
    tail += "\t.section\t.debug_str\n\t{\n$L__info_string0:\n.b8 107\n.b8 0\n\t}\n"
    return head + "\n".join(decls) + "\n" + body + tail


def test_merge_renumbers_files_renames_labels_and_keeps_declarations_once():
    smem = ".extern .shared .align 16 .b8 global_smem[];"
    a = _ptx("kernel_0", ["k.py", "standard.py"], [smem],
             [".loc\t1 5 3", ".loc\t2 216 16, function_name $L__info_string0, inlined_at 1 6 13"])
    b = _ptx("kernel_1", ["k.py", "math.py", "standard.py"], [smem],
             [".loc\t3 196 12, function_name $L__info_string0, inlined_at 1 9 2", ".loc\t2 40 1"])
    merged = merge_ptx([a, b])
    assert merged.count(".version") == 1 and merged.count("global_smem") == 1
    assert merged.count(".visible .entry") == 2
    files = {ln.split('"')[1]: ln.split()[1] for ln in merged.splitlines() if ln.strip().startswith(".file")}
    assert files == {"k.py": "1", "standard.py": "2", "math.py": "3"}
    assert ".loc\t2 196 12, function_name $L__m1_info_string0, inlined_at 1 9 2" in merged  # kernel_1's 3 -> 2
    assert ".loc\t3 40 1" in merged and "$L__m0_BB0_1" in merged and "$L__m1_BB0_1" in merged
    assert "$L__m0_info_string0:" in merged and "$L__m1_info_string0:" in merged
    assert "$L__BB0_1" not in merged.replace("$L__m0_BB0_1", "").replace("$L__m1_BB0_1", "")
    # the same name declared two ways cannot share one module
    other = _ptx("kernel_1", ["k.py"], [".extern .shared .align 8 .b8 global_smem[];"], [".loc\t1 2 3"])
    assert merge_ptx([a, other]) is None
    assert merge_ptx([a, "not ptx"]) is None


def test_split_gives_each_function_its_section_with_the_header_and_symbols():
    text = ("\t.target\tsm_90a\n\n//--------------------- .text.kernel_1 --------------------------\n"
            "kernel_1:\n        /*0000*/  EXIT ;\n//--------------------- .text.kernel_0 --------------------------\n"
            "kernel_0:\n        /*0000*/  NOP ;\n//--------------------- SYMBOLS --------------------------\n\t.type x\n")
    parts = split_disassembly(text, ["kernel_0", "kernel_1"])
    assert "NOP" in parts["kernel_0"] and "EXIT" not in parts["kernel_0"]
    assert "EXIT" in parts["kernel_1"] and "NOP" not in parts["kernel_1"]
    assert all(p.startswith("\t.target\tsm_90a") and "SYMBOLS" in p for p in parts.values())
    assert split_disassembly(text, ["kernel_2"]) is None


def test_ptxas_report_and_resource_usage_split_per_function():
    log = ("ptxas info    : 28 bytes gmem\n"
           "ptxas info    : Compiling entry function 'j1_kernel' for 'sm_90a'\n"
           "ptxas info    : Function properties for j1_kernel\n"
           "    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers\n"
           "ptxas info    : Compiling entry function 'j0_kernel_0' for 'sm_90a'\n"
           "ptxas info    : Function properties for j0_kernel_0\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 22 registers, used 0 barriers\n")
    parts = split_ptxas_log(log)
    assert set(parts) == {"j1_kernel", "j0_kernel_0"}
    assert mc.ptxas_report(parts["j1_kernel"]) == {"registers": 255, "stack_frame_bytes": 0,
                                                   "spill_store_bytes": 8, "spill_load_bytes": 4}
    assert mc.ptxas_report(parts["j0_kernel_0"])["registers"] == 22
    usage = ("Resource usage:\n Common:\n  GLOBAL:28\n Function j1_kernel:\n"
             "  REG:255 STACK:8 SHARED:1024 LOCAL:12 CONSTANT[0]:640 TEXTURE:0 SURFACE:0 SAMPLER:0\n"
             " Function j0_kernel_0:\n  REG:22 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:600 TEXTURE:0\n")
    lines = split_resource_usage(usage)
    assert mc.resource_usage(lines["j1_kernel"]) == {"registers": 255, "stack_bytes": 8,
                                                     "static_shared_bytes": 1024, "local_bytes": 12}
    # a function that declares no shared memory has none of its own (the merged cubin's reserved block)
    assert mc.resource_usage(_no_shared(lines["j0_kernel_0"]))["static_shared_bytes"] == 0
    with_smem = _ptx("k", ["k.py"], [".extern .shared .align 16 .b8 global_smem[];"], [".loc\t1 2 3"])
    assert _declares_shared(with_smem) and not _declares_shared(_ptx("k", ["k.py"], [], [".loc\t1 2 3"]))


def test_batches_balance_the_build_cost_and_keep_the_order():
    jobs = [(i, {"source": "x" * n, "kernels": [{}] * k}) for i, (n, k) in
            enumerate([(8000, 11), (400, 1), (4700, 1), (3400, 3), (2800, 2), (600, 1), (3000, 3)])]
    parts = balanced_batches(jobs, 2)
    assert len(parts) == 2 and sorted(i for p in parts for i, _ in p) == list(range(7))
    assert all([i for i, _ in p] == sorted(i for i, _ in p) for p in parts)
    costs = sorted(sum(build_cost(j) for _, j in p) for p in parts)
    assert costs[1] - costs[0] <= max(build_cost(j) for _, j in jobs) // 2
    assert balanced_batches(jobs[:1], 8) == [jobs[:1]] and len(balanced_batches(jobs, 1)) == 1
