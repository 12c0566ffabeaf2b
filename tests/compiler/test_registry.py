"""The op registry (compiler/registry.py): the allow-list everything rebuilt from a recording runs
through, the loader's grammar checks, and generated text that cannot be broken out of."""
from __future__ import annotations

import ast
import zlib

import pytest
import torch

from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.printer import call_text
from thundervis.compiler.registry import UnknownSymbol, aten_overload, callable_for, check_executable
from thundervis.compiler.serialize import TraceFormatError, executable_trace_from_dict, trace_to_dict

A = TensorProxy("a", (4, 8), "float32", "cpu", (8, 1))
B = TensorProxy("b", (4, 8), "float32", "cpu", (8, 1))
T = TensorProxy("t0", (4, 8), "float32", "cpu", (8, 1))


def _trace(*symbols, chain="forward") -> Trace:
    return Trace("r", (A, B), tuple(symbols), (T,), chain=chain)


def _sym(sym="prims.add", args=(A, B), kwargs=None, aten="aten.add.Tensor", **kw) -> BoundSymbol:
    return BoundSymbol(sym, args, kwargs or {}, T, "f1", aten=aten, **kw)


def test_registry_holds_value_only_aten_ops_and_prims():
    assert aten_overload("aten.add.Tensor") is torch.ops.aten.add.Tensor
    assert callable_for("prims.add") is torch.ops.aten.add
    for name in ("aten.from_file.default", "aten._print.default", "aten.warn.default", "os.system.x",
                 "torch.os.system", "torch.ops.load_library", "aten.__class__.x", "prims.system"):
        with pytest.raises(UnknownSymbol):
            callable_for(name)


@pytest.mark.parametrize("symbol, why", [
    (_sym(sym="torch.os.system", args=("touch x",), aten=None), "may run"),
    (_sym(sym="aten.from_file.default", args=("f",), aten=None), "may run"),
    (_sym(kwargs={"alpha": "2; import os"}), "alpha"),
    (_sym(kwargs={"x\nimport os": 1}), "not an argument"),
    (_sym(kwargs={"__class__": 1}), "not an argument"),
    (_sym(sym="prims.div", aten="aten.div.Tensor_mode", kwargs={"rounding_mode": "system"}), "rounding_mode"),
    (_sym(aten="aten.mul.Tensor"), "not that prim"),
    (_sym(sym="aten.rand.default", args=([2],), aten=None, kwargs={"generator": 1}), "generator"),
    (BoundSymbol("triton_fusion_0\nimport os", (A, B), {}, (T,), "f2", subsymbols=(_sym(),)), "identifier"),
    (BoundSymbol("triton_fusion_0", (A, B), {}, (T,), "f2"), "may run"),
])
def test_check_executable_refuses_with_one_sentence(symbol, why):
    with pytest.raises(UnknownSymbol, match=why) as e:
        check_executable(_trace(symbol))
    assert "\n" not in str(e.value)


def test_check_executable_accepts_prims_aten_ops_and_fusions():
    div = _sym(sym="prims.div", aten="aten.div.Tensor_mode", kwargs={"rounding_mode": "floor"})
    fusion = BoundSymbol("triton_fusion_0", (A, B), {}, (T,), "f2", subsymbols=(_sym(), div), executor="triton")
    check_executable(_trace(_sym(), _sym(sym="aten.add.Tensor", kwargs={"alpha": 2}), fusion))
    with pytest.raises(UnknownSymbol, match="dynamo"):
        check_executable(_trace(_sym(), chain="dynamo"))


def test_every_recorded_trace_of_a_real_run_passes_the_registry(recorded_traces):
    """No false refusals: every pass of every non-dynamo chain and every kernel IR of a real run."""
    traces = recorded_traces
    assert len(traces) > 10
    for t in traces:
        check_executable(t)


@pytest.fixture(scope="module")
def recorded_traces(tmp_path_factory):
    import json
    import os
    import sqlite3
    import textwrap

    from thundervis.compiler.serialize import trace_from_dict
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("registry")
    script = os.path.join(str(folder), "m.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent("""
            import torch
            m = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)))
            x = torch.randn(4, 8)
            torch.nn.functional.cross_entropy(m(x), torch.tensor([1, 2, 3, 0])).backward()
        """))
    out = check_output(os.path.join(str(folder), "m.tvrec"))
    result = run_target(script=script, module=None, args=[], out=out, executors=["torch"])
    assert result.exit_code == 0, result
    from thundervis.recording import open_recording
    with open_recording(result.path) as rec:  # whole texts (schema 4 stores most passes as deltas)
        rows = [rec.pass_json(p.ref) for g in rec.graphs() for ch in g.chains if ch.kind != "dynamo" for p in ch.passes]
    with sqlite3.connect(result.path) as c:
        rows += [r[0] for r in c.execute("SELECT trace_json FROM kernels WHERE trace_json IS NOT NULL")]
    return [trace_from_dict(json.loads(zlib.decompress(r) if isinstance(r, bytes) else r)) for r in rows]


@pytest.mark.parametrize("change, what", [
    (lambda d: d["proxies"][0].update(device="cpu\nimport os"), "device"),
    (lambda d: d["proxies"][0].update(dtype="os"), "dtype"),
    (lambda d: d["symbols"][0].update(kwargs={"K": {"dtype": {"D": "__class__"}}}), "dtype"),
    (lambda d: d["symbols"][0].update(kwargs={"K": {"layout": {"Y": "__class__"}}}), "layout"),
    (lambda d: d["symbols"][0].update(kwargs={"K": {"x\ny": 1}}), "key"),
    (lambda d: d["symbols"][0].update(sym="a b"), "symbol name"),
    (lambda d: d["symbols"][0].update(executor="x y"), "executor"),
])
def test_loader_refuses_what_the_grammar_does_not_allow(change, what):
    d = trace_to_dict(_trace(_sym()))
    change(d)
    with pytest.raises(TraceFormatError, match=what):
        executable_trace_from_dict(d)


def test_call_text_never_lets_a_key_end_the_line():
    b = BoundSymbol("prims.add", (A, B), {"x\nimport os; os.system('boom')\n#": 1, "alpha": 2}, T, "f1")
    text = call_text(b)
    assert "\n" not in text
    assert ast.parse(text)  # one valid statement
    assert "alpha=2" in text and "**{" in text
