"""A small recording for the roofline tests (core, TUI, widget): one forward chain whose final
trace holds a torch ``mm`` and a Triton fusion (add of a broadcast bias + tanh), optionally timed."""
from __future__ import annotations

import os
from typing import Optional

from thundervis.compiler.ir import BoundSymbol, TensorProxy, Trace

MM = (2 * 64 * 128 * 256, (64 * 128 + 128 * 256) * 4, 64 * 256 * 4)  # flops, bytes read, bytes written
FUSION = (2 * 64 * 256, (64 * 256 + 256) * 4, 64 * 256 * 4)


def P(name, shape, strides=None, dtype="float32", device="cuda:0"):
    """A proxy; strides default to row-major."""
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    return TensorProxy(name, tuple(shape), dtype, device, tuple(strides))


def S(sym, args, out, uid, **kwargs):
    """A bound symbol."""
    return BoundSymbol(sym, tuple(args), kwargs, out, uid)


def fusion(name, inputs, members, outputs, uid="f90"):
    """A fusion symbol over ``members``."""
    return BoundSymbol(name, tuple(inputs), {}, tuple(outputs), uid, subsymbols=tuple(members), fusion=True,
                       executor="triton")


HOSTILE_ASM = "[bold red]pwned[/] <script>x()</script> \x1b[31m"

# The compiled Triton source of the fixture's sm_90 build: line 3 loads (uid f3's add), line 4 is
# the tanh (f4); line_uids maps them, the SASS lines point at them.
TRITON_SOURCE = "@triton.jit\ndef kernel(in0, out0):\n    x = tl.load(in0) + 1\n    y = tanh(x)\n    tl.store(out0, y)\n"
SASS = ["        /*0000*/  MOV R1, c[0x0][0x28] ;", "        /*0010*/  LDG.E.128 R4, [R2.64] ;",
        "        /*0020*/  FADD R4, R4, R5 ;", "        /*0030*/  MUFU.TANH R6, R4 ;",
        "        /*0040*/  STG.E [R8.64], R6 ;  // " + HOSTILE_ASM, "        /*0050*/  EXIT ;"]
SASS_LINES = [0, 3, 3, 4, 5, 0]


def build_record() -> dict:
    """The sm_90 build of ``fw_fusion_0`` as ``compiler.aot.pool`` reports it (SASS and PTX only)."""
    return {"status": "ok", "build_key": "k-fw0", "seconds": 1.5,
            "resources": {"registers": 32, "spills": 0, "shared_bytes": 0, "local_bytes": 0, "num_warps": 4},
            "occupancy": {"occupancy": 1.0, "limited_by": "warps"}, "plan": {"plan": "pointwise", "grid": 16},
            "line_uids": {"3": "f3", "4": "f4"},
            "members": {"f3": {"sym": "prims.add", "file": "/work/model.py", "line": 7},
                        "f4": {"sym": "prims.tanh", "file": "/work/model.py", "line": 8}},
            "source": TRITON_SOURCE,
            "stages": {"sass": "\n".join(SASS), "ptx": "ld.global.v4.f32 {%f1}, [%rd1];\nadd.f32 %f2, %f1, 1.0;"},
            "lines": {"sass": SASS_LINES, "ptx": [3, 3]}}


def roofline_recording(path: str, clock: Optional[str] = None, fusion_us: float = 5.0, mm_us: float = 8.0,
                       build: bool = False, targets: Optional[list] = None) -> str:
    """Write the recording at ``path``; ``clock`` ``device`` (timed on cuda:0) or ``host`` (on cpu)
    adds a profiler summary with the given medians; ``build`` records an sm_90 build of the fusion
    (:func:`build_record`, an ``aot_started`` event naming sm_90); ``targets``: an ``aot_started``
    event naming them (no builds). Return ``path``."""
    from thundervis.compiler.serialize import _proxy_json, trace_to_dict
    from thundervis.recording import RecordingObserver
    x, w, b = P("x", (64, 128)), P("w", (128, 256), (1, 128)), P("b", (256,))
    y, bb, t0, t1 = P("y", (64, 256)), P("bb", (64, 256), (0, 1)), P("t0", (64, 256)), P("t1", (64, 256))
    members = (S("prims.expand", (b, (64, 256)), bb, "f2"), S("prims.add", (y, bb), t0, "f3"),
               S("prims.tanh", (t0,), t1, "f4"))
    fus = fusion("fw_fusion_0", [y, b], members, [t1], uid="f9")
    mm = S("prims.mm", (x, w), y, "f1")
    final = Trace("forward", (x, w, b), (mm, fus), (t1,), chain="forward", graph=0, pass_name="codegen")
    region = Trace("fw_fusion_0", (y, b), members, (t1,), chain="forward", graph=0, pass_name="fuse")
    record = {"name": "fw_fusion_0", "executor": "triton", "uid": "f9", "members": ["f2", "f3", "f4"],
              "ops": ["prims.expand", "prims.add", "prims.tanh"], "code": "# code\n", "language": "python",
              "inputs": [_proxy_json(y), _proxy_json(b)], "outputs": [_proxy_json(t1)],
              "source_lines": [], "pass": "fuse", "note": None, "trace": trace_to_dict(region)}
    with RecordingObserver(path) as rec:
        rec.start_run(script=os.path.abspath(__file__), module=None, argv=["x.py"], cwd=os.getcwd())
        rec.graph_started(0, {"n_inputs": 3, "n_nodes": 4})
        rec.pass_done(0, "forward", 0, "codegen", final, 0.001, True)
        rec.kernels_built(0, "forward", [record])
        if targets:
            rec.note("aot_started", {"targets": list(targets), "workers": 1})
        if build:
            rec.note("aot_started", {"targets": ["sm_90"], "workers": 1})
            rec.kernel_compiled(0, "forward", "fw_fusion_0", "sm_90", build_record())
        if clock is not None:
            def timing(name, uid, kind, us, index):
                return {"name": name, "uid": uid, "kind": kind, "executor": "triton" if kind == "fusion" else "torch",
                        "index": index, "calls": 3, "median_us": us, "min_us": us, "max_us": us, "total_us": 3 * us,
                        "share": 0.5, "bytes_read": 0, "bytes_written": 0, "gbps": 0.0}
            rec.runtime(0, "forward", "timings", {
                "clock": clock, "device": "cuda:0" if clock == "device" else "cpu", "calls": 3,
                "symbols": [timing("prims.mm", "f1", "op", mm_us, 0), timing("fw_fusion_0", "f9", "fusion", fusion_us, 1)],
                "step": {"median_us": fusion_us + mm_us, "min_us": 1, "max_us": 1, "total_us": 1}})
            rec.runtime(0, "forward", "walls", {"clock": clock, "device": "cuda:0" if clock == "device" else "cpu",
                                                "calls": 2, "walls_us": [2 * (fusion_us + mm_us)] * 2})
        rec.graph_finished(0, 0.01)
        rec.finish_run("ok", 0)
    return path
