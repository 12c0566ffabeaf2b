"""Shared helpers for the profiling / rerun / repro / export tests: tiny recordings with a fusion
kernel record built from a hand-made region trace (no fusion executor needed)."""
from __future__ import annotations

import os

from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.serialize import _proxy_json, trace_to_dict


def region_trace(device: str = "cpu", name: str = "triton_fusion_0") -> Trace:
    """Return a small region: (a f32[4, 8], b f32[8]) -> t1 = tanh(a + b), t2 = exp(t1) * 0.5."""
    a = TensorProxy("a", (4, 8), "float32", device, (8, 1))
    b = TensorProxy("b", (8,), "float32", device, (1,))
    t0 = TensorProxy("t0", (4, 8), "float32", device, (8, 1))
    t1 = TensorProxy("t1", (4, 8), "float32", device, (8, 1))
    t2 = TensorProxy("t2", (4, 8), "float32", device, (8, 1))
    t3 = TensorProxy("t3", (4, 8), "float32", device, (8, 1))
    syms = (
        BoundSymbol("prims.add", (a, b), {}, t0, "f1", aten="aten.add.Tensor", executor="triton"),
        BoundSymbol("prims.tanh", (t0,), {}, t1, "f2", aten="aten.tanh.default", executor="triton"),
        BoundSymbol("prims.exp", (t1,), {}, t2, "f3", aten="aten.exp.default", executor="triton"),
        BoundSymbol("prims.mul", (t2, 0.5), {}, t3, "f4", aten="aten.mul.Tensor", executor="triton"),
    )
    return Trace(name, (a, b), syms, (t1, t3), chain="forward", graph=0, pass_name="fuse")


def kernel_record(region: Trace, executor: str = "triton") -> dict:
    """Return a kernel record (the compiler's format) for ``region``."""
    return {"name": region.name, "executor": executor, "uid": "f9", "members": [b.uid for b in region.symbols],
            "ops": [b.sym for b in region.symbols], "code": "# generated code (never executed by viewers)\n",
            "language": "python", "inputs": [_proxy_json(p) for p in region.inputs],
            "outputs": [_proxy_json(p) for p in region.flat_outputs()],
            "source_lines": [{"file": "model.py", "line": 3, "code": "y = f(x)", "module": "", "direction": "forward"}],
            "pass": "fuse", "note": None, "trace": trace_to_dict(region)}


def make_recording(path: str, records: list[tuple[int, str, dict]]) -> str:
    """Write a recording at ``path`` holding ``records`` [(graph, chain, kernel record)]; return it."""
    from thundervis.recording import RecordingObserver
    with RecordingObserver(path) as rec:
        rec.start_run(script=os.path.abspath(__file__), module=None, argv=["x.py"], cwd=os.getcwd())
        for g, chain, r in records:
            rec.graph_started(g, {"n_inputs": 2, "n_nodes": 4})
            rec.kernels_built(g, chain, [r])
            rec.graph_finished(g, 0.01)
        rec.finish_run("ok", 0)
    return path
