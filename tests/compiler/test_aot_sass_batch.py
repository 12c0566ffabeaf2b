"""One ``nvdisasm`` per multi-launch kernel (``compiler/aot/sass_batch.py``): the merged PTX and
the split disassembly (tests/compiler/test_aot.py compiles a real kernel both ways)."""
from __future__ import annotations

from thundervis.compiler.aot.sass_batch import merge_ptx, split_disassembly


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
