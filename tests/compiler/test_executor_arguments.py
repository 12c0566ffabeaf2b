"""Executors never drop arguments: a fusion executor that cannot honour an argument of a prim
(``round``'s ``decimals``, ``scatter``'s ``reduce``, a bitcasting ``view``) refuses the prim, which
then runs in torch with the reason recorded; the compiled result matches eager."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.executors import nvfuser_lowering as nvl
from thundervis.compiler.executors import triton_ops
from thundervis.compiler.executors.arguments import dropped_argument
from thundervis.compiler.executors.triton_executor import TritonExecutor
from thundervis.compiler.ir import BoundSymbol, TensorProxy


def _sym(sym, aten, args, kwargs=None, device="cpu", out_dtype="float32", out_shape=(4, 4)):
    out = TensorProxy("y", out_shape, out_dtype, device, None)
    return BoundSymbol(sym, tuple(args), kwargs or {}, out, uid="f0", aten=aten)


def _x(device="cpu"):
    return TensorProxy("x", (4, 4), "float32", device, (4, 1))


@pytest.mark.parametrize("decimals", [3, -3])
def test_triton_and_nvfuser_refuse_round_with_decimals(decimals):
    b = _sym("prims.round", "aten.round.decimals", (_x(),), {"decimals": decimals})
    assert TritonExecutor().problem(b) == f"triton cannot honour argument decimals={decimals} of round.decimals, so torch runs it"
    bc = _sym("prims.round", "aten.round.decimals", (_x("cuda:0"),), {"decimals": decimals}, device="cuda:0")
    assert nvl.lowering_problem(bc).startswith(f"nvfuser cannot honour argument decimals={decimals}")


def test_neutral_values_are_accepted():
    assert TritonExecutor().problem(_sym("prims.round", "aten.round.decimals", (_x(),), {"decimals": 0})) is None
    assert TritonExecutor().problem(_sym("prims.round", "aten.round.default", (_x(),))) is None
    gather = _sym("prims.gather", "aten.gather.default", (_x(), 1, TensorProxy("i", (4, 4), "int64", "cpu", (4, 1))),
                  {"sparse_grad": False})
    assert TritonExecutor().problem(gather) is None


@pytest.mark.parametrize("sym, aten, args, kwargs, dtype, arg", [
    ("prims.scatter", "aten.scatter.value_reduce", (None, 1, None, 2.0), {"reduce": "add"}, "float32", "reduce"),
    ("prims.view", "aten.view.dtype", (None, torch.int32), {}, "int32", "dtype"),
])
def test_triton_refuses_other_dropped_arguments(sym, aten, args, kwargs, dtype, arg):
    x, idx = _x(), TensorProxy("i", (4, 1), "int64", "cpu", (1, 1))
    args = tuple(x if i == 0 else (idx if a is None else a) for i, a in enumerate(args))
    problem = TritonExecutor().problem(_sym(sym, aten, args, kwargs, out_dtype=dtype))
    assert problem is not None and f"argument {arg}=" in problem


def test_var_unbiased_false_is_honoured_not_dropped():
    """``var.dim(unbiased=False)`` is a correction of 0: the generator reads ``unbiased``."""
    b = _sym("prims.var", "aten.var.dim", (_x(), [1], False), out_shape=(4,))
    assert TritonExecutor().problem(b) is None
    assert "unbiased" in triton_ops.HONOURED["var"] and "unbiased" in nvl.HONOURED["var"]


def test_every_supported_prim_lists_its_honoured_arguments():
    """A prim without an entry would be refused whatever its arguments: the tables stay complete."""
    assert set(triton_ops.SUPPORTED) <= set(triton_ops.HONOURED)
    assert set(nvl.SUPPORTED) <= set(nvl.HONOURED)


def test_unknown_overload_is_left_to_other_checks():
    assert dropped_argument("triton", "prims.nothing", None, {}, ()) is None


@pytest.mark.parametrize("decimals", [3, -3])
def test_round_with_decimals_matches_eager_with_default_executors(decimals, recorder_cls):
    rec = recorder_cls()
    x = torch.randn(64) * 1000

    def f(t):
        return torch.round(t * 1.5, decimals=decimals) + 1

    torch._dynamo.reset()
    got = torch.compile(f, backend=ThundervisCompiler(observer=rec), dynamic=False)(x)
    torch._dynamo.reset()
    torch.testing.assert_close(got, f(x), rtol=0, atol=0)
    claimed = [b for t in rec.all_traces() if t.pass_name == "claim" for b in t.symbols if b.sym == "prims.round"]
    assert claimed and all(b.executor == "torch" for b in claimed)
    assert any(f"decimals={decimals}" in (b.note or "") for b in claimed)
