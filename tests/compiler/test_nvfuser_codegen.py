"""nvFuser definitions: golden text, valid Python, every prim mapped, and numerics through a stub.

Regions are built by hand from ATen calls (output metadata from meta tensors), so the goldens do not
depend on the installed torch's decomposition table. ``THUNDERVIS_UPDATE_GOLDEN=1`` rewrites the
golden files. The stub ``FusionDefinition`` records every call and evaluates it with torch under
nvFuser's rules (no implicit broadcasting across shapes, one dtype per op, typed scalars), so a
program that forgets a broadcast or a cast fails here, not only on a GPU.
"""
from __future__ import annotations

import os
import pathlib

import pytest
import torch

from thundervis.compiler.executors.nvfuser_codegen import (
    NvFuserLoweringError, generate_definition, load_definition, lowering_problem,
    tensor_descriptor)
from thundervis.compiler.executors.nvfuser_executor import NvFuserExecutor, nvfuser_unavailable_reason
from thundervis.compiler.interpreter import run_symbol
from thundervis.compiler.ir import BoundSymbol, TensorProxy, map_structure
from thundervis.compiler.prims import prim_for
from thundervis.compiler.resolve import resolve_overload
from thundervis.compiler.values import contiguous_strides, dtype_name

from nvfuser_stub import NVFUSER_OPS, StubFusionDefinition, _StubDataType

GOLDEN = pathlib.Path(__file__).parent / "golden" / "nvfuser"
UPDATE = os.environ.get("THUNDERVIS_UPDATE_GOLDEN") == "1"
DEVICE = "cuda:0"


# --------------------------------------------------------------------------------------------------
# Building regions by hand


class Region:
    """Builds a fusion symbol from ATen calls; output shapes/dtypes come from meta tensors."""

    def __init__(self, name: str = "nvfusion_0"):
        self.name, self.inputs, self.prims, self.n = name, [], [], 0

    def input(self, name, shape, dtype="float32", strides=None, device=DEVICE) -> TensorProxy:
        p = TensorProxy(name, tuple(shape), dtype, device, tuple(strides or contiguous_strides(shape)))
        self.inputs.append(p)
        return p

    def call(self, aten: str, *args, **kwargs) -> TensorProxy:
        ov = resolve_overload(aten)

        def meta(x):
            if isinstance(x, TensorProxy):
                return torch.empty_strided(x.shape, x.strides, dtype=getattr(torch, x.dtype), device="meta")
            if isinstance(x, torch.device):
                return torch.device("meta")
            return x
        out = ov(*map_structure(meta, args), **map_structure(meta, kwargs))
        proxy = TensorProxy(f"t{self.n}", tuple(out.shape), dtype_name(out.dtype), DEVICE, tuple(out.stride()))
        self.prims.append(BoundSymbol(sym=f"prims.{prim_for(ov).name}", args=args, kwargs=kwargs, outputs=proxy,
                                      uid=f"f{self.n}", aten=aten))
        self.n += 1
        return proxy

    def fusion(self, *outputs) -> BoundSymbol:
        return BoundSymbol(sym=self.name, args=tuple(self.inputs), kwargs={}, outputs=tuple(outputs),
                           uid="f99", origin=tuple(p.uid for p in self.prims), subsymbols=tuple(self.prims),
                           executor="nvfuser", fusion=True)


def pointwise_broadcast():
    r = Region("nvfusion_0")
    x, b = r.input("x", [8, 32]), r.input("b", [32])
    s, c = r.input("s", [8, 1]), r.input("c", [])
    t0 = r.call("aten.add.Tensor", x, b)
    t1 = r.call("aten.mul.Tensor", t0, s)
    t2 = r.call("aten.tanh.default", t1)
    t3 = r.call("aten.exp.default", t2)
    t4 = r.call("aten.sub.Tensor", t3, c)
    return r.fusion(t4)


def scalar_ops():
    r = Region("nvfusion_1")
    x, i = r.input("x", [4, 16]), r.input("i", [4, 16], "int64")
    t0 = r.call("aten.mul.Tensor", x, 0.5)
    t1 = r.call("aten.add.Tensor", t0, 1)
    t2 = r.call("aten.pow.Tensor_Scalar", t1, 2)
    t3 = r.call("aten.div.Tensor", t2, 3)
    t4 = r.call("aten.sub.Tensor", t3, x, alpha=2)
    t5 = r.call("aten.clamp.default", t4, -1.0, 1.0)
    t6 = r.call("aten.add.Tensor", i, 2.5)  # int tensor + float scalar -> float32
    t7 = r.call("aten.mul.Tensor", i, 3)  # stays int64
    t8 = r.call("aten.div.Tensor_mode", t7, 2, rounding_mode="trunc")
    return r.fusion(t5, t6, t8)


def type_conversion():
    r = Region("nvfusion_2")
    x, y = r.input("x", [4, 16], "bfloat16"), r.input("y", [16], "float16")
    m, i = r.input("m", [4, 16], "bool"), r.input("i", [4, 16], "int32")
    t0 = r.call("aten._to_copy.default", x, dtype=torch.float32)
    t1 = r.call("aten.add.Tensor", x, y)  # bf16 + f16 -> f32
    t2 = r.call("aten.mul.Tensor", x, 2.0)  # bf16, computed in f32
    t3 = r.call("aten._to_copy.default", t2, dtype=torch.float16)
    t4 = r.call("aten.add.Tensor", i, x)  # int32 + bf16 -> bf16
    t5 = r.call("aten.mul.Tensor", m, x)  # bool * bf16 -> bf16
    t6 = r.call("aten.gt.Scalar", t0, 0.25)
    return r.fusion(t1, t3, t4, t5, t6)


def layer_norm():
    r = Region("nvfusion_3")
    x, w, b = r.input("x", [4, 8, 16], "bfloat16"), r.input("w", [16]), r.input("b", [16])
    xf = r.call("aten._to_copy.default", x, dtype=torch.float32)
    var = r.call("aten.var.correction", xf, [2], correction=0, keepdim=True)
    mean = r.call("aten.mean.dim", xf, [-1], True)
    t0 = r.call("aten.add.Tensor", var, 1e-05)
    rstd = r.call("aten.rsqrt.default", t0)
    t1 = r.call("aten.sub.Tensor", xf, mean)
    t2 = r.call("aten.mul.Tensor", t1, rstd)
    t3 = r.call("aten.mul.Tensor", t2, w)
    t4 = r.call("aten.add.Tensor", t3, b)
    out = r.call("aten._to_copy.default", t4, dtype=torch.bfloat16)
    return r.fusion(out, mean, rstd)


def softmax():
    r = Region("nvfusion_4")
    x = r.input("x", [2, 4, 8, 8])
    t0 = r.call("aten.amax.default", x, [-1], True)
    t1 = r.call("aten.sub.Tensor", x, t0)
    t2 = r.call("aten.exp.default", t1)
    t3 = r.call("aten.sum.dim_IntList", t2, [-1], True)
    t4 = r.call("aten.div.Tensor", t2, t3)
    return r.fusion(t4)


def var_mean():
    r = Region("nvfusion_5")
    x = r.input("x", [4, 16])
    v = r.call("aten.var.correction", x, [1], correction=1.0)
    t0 = r.call("aten.view.default", v, [4, 1])
    t1 = r.call("aten.sum.dim_IntList", x, [1])
    t2 = r.call("aten.view.default", t1, [4, 1])
    mean = r.call("aten.div.Tensor", t2, 16.0)
    total = r.call("aten.sum.default", x)
    m0 = r.call("aten.mean.dim", x, [0])
    return r.fusion(t0, mean, total, m0)


def where():
    r = Region("nvfusion_6")
    x, k = r.input("x", [4, 16]), r.input("k", [4, 1], "bool")
    c = r.call("aten.gt.Scalar", x, 0)
    z = r.call("aten.scalar_tensor.default", 0.0, dtype=torch.float32, device=torch.device(DEVICE))
    t0 = r.call("aten.where.self", c, x, z)
    t1 = r.call("aten.where.ScalarOther", k, t0, float("-inf"))
    t2 = r.call("aten.logical_and.default", c, k)
    return r.fusion(t1, t2)


def shapes():
    r = Region("nvfusion_7")
    x, y = r.input("x", [2, 3, 4]), r.input("y", [4, 3], strides=[1, 4])
    t0 = r.call("aten.permute.default", x, [0, 2, 1])
    t1 = r.call("aten.add.Tensor", t0, y)
    t1c = r.call("aten.clone.default", t1, memory_format=torch.contiguous_format)
    t2 = r.call("aten.view.default", t1c, [8, 3])
    t3 = r.call("aten.unsqueeze.default", t2, 0)
    t4 = r.call("aten.expand.default", t3, [2, 8, 3])
    t5 = r.call("aten.slice.Tensor", t4, 1, 2, 9223372036854775807)
    t6 = r.call("aten.select.int", t5, 0, -1)
    t7 = r.call("aten.cat.default", [t6, t2], 0)
    t8 = r.call("aten.constant_pad_nd.default", t7, [1, 0], 0.0)
    t9 = r.call("aten.squeeze.dims", t3, [0])
    t10 = r.call("aten.alias.default", t9)
    return r.fusion(t8, t10)


REGIONS = {f.__name__: f for f in (pointwise_broadcast, scalar_ops, type_conversion, layer_norm, softmax,
                                   var_mean, where, shapes)}

# What each prim must become (at least this nvFuser op in its lines).
EXPECTED_OP = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "tanh": "tanh", "exp": "exp",
               "pow": "pow", "clamp": "minimum", "gt": "gt", "where": "where", "logical_and": "logical_and",
               "convert_element_type": "cast", "var": "var", "mean": "sum", "sum": "sum", "amax": "max",
               "rsqrt": "rsqrt", "view": "reshape", "permute": "permute", "unsqueeze": "broadcast_in_dim",
               "expand": "broadcast_in_dim", "slice": "slice", "select": "squeeze", "cat": "cat",
               "constant_pad_nd": "pad", "squeeze": "squeeze", "clone": "set", "alias": "set", "scalar_tensor": "full"}



@pytest.fixture(scope="module")
def programs():
    return {name: generate_definition(make()) for name, make in REGIONS.items()}


# --------------------------------------------------------------------------------------------------
# Text


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_golden_definition(name, programs):
    text = programs[name].source
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with THUNDERVIS_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name}: definition changed; rerun with THUNDERVIS_UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_definition_is_python_and_maps_every_prim(name, programs):
    prog = programs[name]
    compile(prog.source, name, "exec")
    fusion = REGIONS[name]()
    lines = prog.source.splitlines()
    for prim in fusion.subsymbols:
        # Each prim is announced by a comment and followed by the ops that compute its output.
        marker = next(i for i, line in enumerate(lines) if line.strip().startswith(f"# {prim.outputs.name} = {prim.sym}("))
        block = []
        for line in lines[marker + 1:]:
            if line.strip().startswith("#") or "add_output" in line:
                break
            block.append(line)
        op = EXPECTED_OP[prim.sym.removeprefix("prims.")]
        assert any(f"fd.ops.{op}(" in line for line in block), f"{prim.sym} not lowered to {op}: {block}"
        assert any(line.strip().startswith(f"{prim.outputs.name} = ") for line in block)
    assert set(prog.ops) <= NVFUSER_OPS, set(prog.ops) - NVFUSER_OPS
    assert prog.source.count("fd.define_tensor(") == len(fusion.args)
    assert prog.source.count("fd.add_output(") == len(fusion.outputs)


def test_broadcast_and_promotion_are_explicit(programs):
    text = programs["pointwise_broadcast"].source
    assert "b_b = fd.ops.broadcast_in_dim(b, shape=[8, 32], broadcast_dims=[1])" in text
    assert "s_b = fd.ops.broadcast_in_dim(s, shape=[8, 32], broadcast_dims=[0, 1])" in text
    assert "c_b = fd.ops.broadcast_in_dim(c, shape=[8, 32], broadcast_dims=[])" in text
    conv = programs["type_conversion"].source
    # bf16 arithmetic is computed in fp32 and rounded once, as ATen's opmath does.
    assert "t2_f32 = fd.ops.mul(t0, s0)" in conv and conv.count("fd.ops.cast(x, dtype=DataType.Float)") == 1 and "t2 = fd.ops.cast(t2_f32, dtype=DataType.BFloat16)" in conv
    assert "s0 = fd.define_scalar(2.0, dtype=DataType.Float)" in conv


def test_input_descriptors_follow_nvfuser_convention():
    assert tensor_descriptor([2, 3, 4], [12, 4, 1]) == ([-1, -1, -1], [True, True, True], [2, 1, 0])
    assert tensor_descriptor([2, 3, 4], [12, 1, 3]) == ([-1, -1, -1], [True, True, True], [2, 0, 1])
    assert tensor_descriptor([1, 3, 4], [12, 4, 1]) == ([1, -1, -1], [None, True, True], [2, 1, 0])
    assert tensor_descriptor([4, 3], [0, 1]) == ([-1, -1], [None, True], [1, 0])
    assert tensor_descriptor([4, 3], [6, 2]) == ([-1, -1], [True, False], [1, 0])  # inner stride 2
    assert tensor_descriptor([], []) == ([], [], [])


def _example(p: TensorProxy, gen: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, p.dtype)
    if dtype == torch.bool:
        base = torch.rand(p.shape, generator=gen) > 0.5
    elif not dtype.is_floating_point:
        base = torch.randint(-5, 6, p.shape, generator=gen).to(dtype)
    else:
        base = (torch.randn(p.shape, generator=gen) * 0.8).to(dtype)
    if p.strides and p.strides != contiguous_strides(p.shape):
        out = torch.empty_strided(p.shape, p.strides, dtype=dtype)
        out.copy_(base)
        return out
    return base


def _reference(fusion: BoundSymbol, inputs) -> tuple:
    """Eager result: each prim through its ATen overload (reference interpreter), on CPU."""
    cpu = torch.device("cpu")
    prims = [p.replace(kwargs=map_structure(lambda v: cpu if isinstance(v, torch.device) else v, p.kwargs))
             for p in fusion.subsymbols]
    env = {p.name: t for p, t in zip(fusion.args, inputs)}
    for p in prims:
        run_symbol(p, env, expand=True, resolver=lambda name, p=p: resolve_overload(p.aten))
    return tuple(env[p.name] for p in fusion.outputs)


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_program_runs_on_stub_and_matches_eager(name, programs):
    fusion = REGIONS[name]()
    gen = torch.Generator().manual_seed(0)
    inputs = [_example(p, gen) for p in fusion.args]
    fd = StubFusionDefinition(inputs)
    define = load_definition(programs[name], {"DataType": _StubDataType()})
    define(fd)
    assert fd.calls.count("define_tensor") == len(fusion.args) and not fd.inputs
    assert fd.calls.count("add_output") == len(fusion.outputs)
    expected = _reference(fusion, inputs)
    for got, want, proxy in zip(fd.outputs, expected, fusion.outputs):
        assert got.dtype == want.dtype == getattr(torch, proxy.dtype), proxy.name
        assert tuple(got.shape) == tuple(want.shape) == proxy.shape, proxy.name
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, equal_nan=True, msg=f"{name}: {proxy.name}")


def test_generated_namespace_has_no_builtins(programs):
    prog = programs["softmax"]
    bad = prog.__class__(prog.name, prog.source.replace("fd.ops.exp(", "__import__('os').getcwd() or fd.ops.exp("),
                         prog.inputs, prog.outputs, prog.ops)
    define = load_definition(bad, {"DataType": _StubDataType()})
    with pytest.raises(NameError):
        define(StubFusionDefinition([torch.randn(2, 4, 8, 8)]))


# --------------------------------------------------------------------------------------------------
# What can and cannot run


def _prim(aten, *args, **kwargs) -> BoundSymbol:
    r = Region()
    r.call(aten, *args, **kwargs)
    return r.prims[0]


def _t(shape, dtype="float32", device=DEVICE):
    return TensorProxy("a", tuple(shape), dtype, device, contiguous_strides(shape))


def test_lowering_problem_per_prim_and_dtype():
    a, w = _t([4, 8]), TensorProxy("w", (8, 8), "float32", DEVICE, (8, 1))
    assert lowering_problem(_prim("aten.add.Tensor", a, 1.0)) is None
    assert lowering_problem(_prim("aten.sum.dim_IntList", a, [1])) is None
    assert "matmuls stay with torch" in lowering_problem(_prim("aten.mm.default", a, w))
    assert "random numbers" in lowering_problem(_prim("aten.rand_like.default", a))
    assert "index reductions" in lowering_problem(_prim("aten.argmax.default", a, 1))
    assert "flip" in lowering_problem(_prim("aten.flip.default", a, [0]))
    assert "complex64" in lowering_problem(_prim("aten.exp.default", _t([4], "complex64")))
    assert "int8" in lowering_problem(_prim("aten.neg.default", _t([4], "int8")))
    assert "runs CUDA tensors" in lowering_problem(_prim("aten.exp.default", _t([4], device="cpu")))
    assert "non-integer correction" in lowering_problem(_prim("aten.var.correction", a, [1], correction=0.5))
    assert "floor" in lowering_problem(_prim("aten.div.Tensor_mode", _t([4], "int64"), 2, rounding_mode="floor"))
    assert "bitcast" in lowering_problem(_prim("aten.view.dtype", a, torch.int32))
    assert lowering_problem(_prim("aten.div.Tensor_mode", a, 2.0, rounding_mode="floor")) is None
    # A CPU scalar (0-d) tensor may feed a CUDA fusion, as nvFuser accepts it with is_cpu=True.
    assert lowering_problem(_prim("aten.mul.Tensor", a, _t([], device="cpu"))) is None


def test_bad_region_raises_clear_error():
    r = Region("nvfusion_9")
    a = r.input("a", [4, 8])
    r.call("aten.flip.default", a, [0])
    with pytest.raises(NvFuserLoweringError, match="flip"):
        generate_definition(r.fusion(r.prims[0].outputs))


def test_executor_without_nvfuser_says_why_and_still_generates_text():
    ex = NvFuserExecutor()
    reason = nvfuser_unavailable_reason()
    fusion = softmax()
    record = ex.build_kernel(fusion)
    assert record.language == "nvfuser" and record.code.startswith("# nvFuser FusionDefinition")
    assert ex.lowering_problem(fusion.subsymbols[0]) is None
    if reason is None:
        pytest.skip("nvFuser and CUDA are present here")
    assert reason.endswith(".") and "nvFuser" in reason or "CUDA" in reason
    assert not ex.can_run(fusion.subsymbols[0])
    assert reason in ex.why_not(fusion.subsymbols[0])
    assert record.note == f"not built here: {reason}"


# --------------------------------------------------------------------------------------------------
# The real thing, where nvFuser and CUDA exist


@pytest.mark.cuda
@pytest.mark.skipif(nvfuser_unavailable_reason() is not None, reason=str(nvfuser_unavailable_reason()))
@pytest.mark.parametrize("name", sorted(REGIONS))
def test_nvfuser_runs_definition(name):
    ex = NvFuserExecutor()
    fusion = REGIONS[name]()
    gen = torch.Generator().manual_seed(0)
    inputs = [_example(p, gen) for p in fusion.args]
    kernel = ex.callable_for(fusion)
    got = kernel(*[t.cuda() if p.device.startswith("cuda") else t for p, t in zip(fusion.args, inputs)])
    for g, w in zip(got, _reference(fusion, inputs)):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5, equal_nan=True)


# --------------------------------------------------------------------------------------------------
# Every region of the example GPT (forward and backward), as the fuse pass forms them for nvFuser


class _AssumeAvailable(NvFuserExecutor):
    """Claims and fuses as on a CUDA machine with nvFuser (nothing is built: text and stub only)."""

    def available(self):
        return None


def _on_cuda(b: BoundSymbol) -> BoundSymbol:
    def dev(v):
        return TensorProxy(v.name, v.shape, v.dtype, DEVICE, v.strides) if isinstance(v, TensorProxy) else v
    return b.replace(args=map_structure(dev, b.args), kwargs=map_structure(dev, b.kwargs),
                     outputs=map_structure(dev, b.outputs), subsymbols=tuple(_on_cuda(s) for s in b.subsymbols))


@pytest.mark.slow
def test_every_gpt_region_generates_and_matches_eager_on_stub(example):
    from thundervis.compiler.backend import ThundervisCompiler
    from thundervis.compiler.executors.base import get_executor
    from thundervis.compiler.observer import CompileObserver
    from thundervis.compiler.passes.claim import claim
    from thundervis.compiler.passes.fuse import fuse

    traces = {}

    class AfterDce(CompileObserver):
        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            if name == "dce":
                traces[chain] = trace

    gpt = example("train_gpt")
    model, batches = gpt.build(batches=1)
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=["torch"], observer=AfterDce()))
    compiled(*batches[0])[1].backward()
    assert set(traces) == {"forward", "backward"}
    ex = _AssumeAvailable()
    for chain, trace in traces.items():
        trace = trace.replace(symbols=tuple(_on_cuda(b) for b in trace.symbols))
        fused = fuse(claim(trace, [ex, get_executor("torch")]), ex)
        regions = [b for b in fused.symbols if b.fusion]
        assert len(regions) >= 10, chain
        for fusion in regions:
            gen = torch.Generator().manual_seed(0)
            inputs = [_example(p, gen) for p in fusion.args]
            fd = StubFusionDefinition(inputs)
            load_definition(generate_definition(fusion), {"DataType": _StubDataType()})(fd)
            for got, want, proxy in zip(fd.outputs, _reference(fusion, inputs), fusion.outputs):
                assert got.dtype == want.dtype and tuple(got.shape) == proxy.shape, (chain, fusion.sym, proxy.name)
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True,
                                           msg=f"{chain} {fusion.sym} {proxy.name}")
