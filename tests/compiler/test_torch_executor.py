"""The torch executor binds cheap callables with exactly the ATen overload's semantics."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler.executors.torch_executor import FAST_BINDINGS, fast_callable
from thundervis.compiler.resolve import resolve_overload

_g = torch.Generator().manual_seed(0)


def _r(*shape):
    return torch.randn(*shape, generator=_g)


# One argument list per fast binding, in the overload's own calling convention.
SAMPLES = {
    "aten.view.default": lambda: ((_r(4, 6), [3, 8]), {}),
    "aten.t.default": lambda: ((_r(4, 6),), {}),
    "aten.transpose.int": lambda: ((_r(2, 3, 4), 1, -1), {}),
    "aten.mm.default": lambda: ((_r(3, 4), _r(4, 5)), {}),
    "aten.bmm.default": lambda: ((_r(2, 3, 4), _r(2, 4, 5)), {}),
    "aten.addmm.default": lambda: ((_r(5), _r(3, 4), _r(4, 5)), {"beta": 0.5, "alpha": 2}),
    "aten.clone.default": lambda: ((_r(3, 4).t(),), {"memory_format": torch.contiguous_format}),
    "aten.detach.default": lambda: ((_r(3, 4),), {}),
    "aten.native_layer_norm.default": lambda: ((_r(2, 3, 4), [4], _r(4), _r(4), 1e-5), {}),
    "aten._softmax.default": lambda: ((_r(3, 4), -1, False), {}),
    "aten.embedding.default": lambda: ((_r(10, 4), torch.tensor([[1, 2], [9, 0]])), {}),
    "aten.bitwise_not.default": lambda: ((torch.tensor([True, False]),), {}),
    "aten.sum.dim_IntList": lambda: ((_r(2, 3, 4), [0, 2], True), {"dtype": torch.float64}),
}


def test_every_fast_binding_has_a_sample():
    assert set(SAMPLES) == set(FAST_BINDINGS)


@pytest.mark.parametrize("name", sorted(FAST_BINDINGS))
def test_fast_binding_matches_the_overload(name):
    args, kwargs = SAMPLES[name]()
    overload = resolve_overload(name)
    expected = overload(*args, **kwargs)
    got = fast_callable(name, overload)(*args, **kwargs)
    exp_flat = expected if isinstance(expected, (tuple, list)) else (expected,)
    got_flat = got if isinstance(got, (tuple, list)) else (got,)
    assert len(exp_flat) == len(got_flat)
    for e, g in zip(exp_flat, got_flat):
        assert g.dtype == e.dtype and g.shape == e.shape and g.stride() == e.stride()
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_other_overloads_bind_their_raw_operator():
    overload = torch.ops.aten.add.Tensor
    fn = fast_callable("aten.add.Tensor", overload)
    assert fn is overload._op
    a = torch.tensor([1, 2])
    assert fn(a, 0.5).dtype == overload(a, 0.5).dtype  # scalar promotion as the overload does it


def test_importing_one_executor_first_still_registers_every_builtin_one():
    """The registry loads the builtin executors on first use; a module that imported the torch
    executor on its own before that (the CPU path's region functions, a numerics check or a
    rerun in a fresh process) must not leave triton unregistered: every graph would silently get
    no fusion executor and run on torch alone."""
    import subprocess
    import sys
    code = ("import thundervis.compiler.executors.torch_executor\n"
            "from thundervis.compiler.executors import available_executors, fusion_executor_names\n"
            "print(available_executors(), fusion_executor_names('cpu'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'triton'" in out.stdout.split("]")[0] and "['triton']" in out.stdout, out.stdout
