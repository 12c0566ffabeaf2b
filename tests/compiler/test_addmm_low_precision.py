"""bfloat16 / float16 ``addmm`` (what ``nn.Linear`` with a bias and GPT-2's ``Conv1D`` run) and
``baddbmm`` compile to what eager computes, bit for bit on the CPU: one GEMM in the inputs' dtype
that adds the bias before its one rounding. PyTorch's decomposition upcast every input to float32
(a float32 ``prims.mm`` over float32 copies of activations and weights); the op now stays whole
below float32, and float32 still decomposes."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import ThundervisCompiler


def _compiled(recorder_cls, fn, *args, backward=None):
    """Return (compiled ``fn(*args)``, {chain: its final trace}) with the default executors, after
    ``backward(out)`` when given."""
    torch._dynamo.reset()
    rec = recorder_cls()
    out = torch.compile(fn, backend=ThundervisCompiler(observer=rec), dynamic=False)(*args)
    if backward is not None:
        backward(out)
    assert not rec.failures, rec.failures
    finals = {c: rec.traces(c)["codegen"] for c in ("forward", "backward", "inference") if rec.traces(c)}
    return out, finals


def _float32_values(trace) -> list[str]:
    """The symbols of ``trace`` (members of fusions included) that make a float32 tensor."""
    return [b.sym for b in trace.walk() for p in b.flat_outputs() if getattr(p, "dtype", None) == "float32"]


def _is_matmul(b) -> bool:
    return b.sym in ("prims.mm", "prims.bmm") or "addmm" in b.sym or "baddbmm" in b.sym


def _matmuls(trace) -> list[str]:
    return [b.sym for b in trace.walk() if _is_matmul(b)]


CASES = {  # name: (fn, argument shapes: first the bias/input)
    "addmm 1-D bias": (lambda c, a, b: torch.addmm(c, a, b), ((48,), (32, 64), (64, 48))),
    "addmm 2-D bias": (lambda c, a, b: torch.addmm(c, a, b), ((32, 48), (32, 64), (64, 48))),
    "addmm row bias": (lambda c, a, b: torch.addmm(c, a, b), ((1, 48), (32, 64), (64, 48))),
    "addmm alpha beta": (lambda c, a, b: torch.addmm(c, a, b, beta=2.0, alpha=0.5), ((48,), (32, 64), (64, 48))),
    "addmm 2-D alpha beta": (lambda c, a, b: torch.addmm(c, a, b, beta=0.75, alpha=3.0), ((32, 48), (32, 64), (64, 48))),
    "baddbmm alpha beta": (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0), ((3, 16, 24), (3, 16, 40), (3, 40, 24))),
    "linear with bias": (lambda bias, x, w: torch.nn.functional.linear(x, w, bias), ((48,), (4, 8, 64), (48, 64))),
    "linear without bias": (lambda w, x: torch.nn.functional.linear(x, w), ((48, 64), (4, 8, 64))),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_low_precision_addmm_matches_eager_bit_for_bit(recorder_cls, case, dtype):
    fn, shapes = CASES[case]
    torch.manual_seed(0)
    args = [torch.randn(s, dtype=dtype) for s in shapes]
    out, finals = _compiled(recorder_cls, fn, *args)
    want = fn(*args)
    assert out.dtype == want.dtype == dtype
    assert torch.equal(out, want), f"{case}: {(out != want).sum().item()} of {out.numel()} elements differ"
    (trace,) = finals.values()
    assert _matmuls(trace), "no matrix product in the final trace"
    assert not _float32_values(trace), f"{case}: float32 values in the final trace: {_float32_values(trace)}"


def test_float32_addmm_still_decomposes(recorder_cls):
    torch.manual_seed(0)
    c, a, b = torch.randn(48), torch.randn(32, 64), torch.randn(64, 48)
    fn = lambda c, a, b: torch.addmm(c, a, b, beta=2.0, alpha=0.5)  # noqa: E731
    out, finals = _compiled(recorder_cls, fn, c, a, b)
    torch.testing.assert_close(out, fn(c, a, b))
    (trace,) = finals.values()
    assert "prims.mm" in _matmuls(trace) and not any("addmm" in s for s in _matmuls(trace))


def test_bf16_linear_training_step_has_no_float32_matmul(recorder_cls):
    # Forward and backward of a bf16 Linear with a bias: every product in bf16, the output and the
    # gradients equal eager's.
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 48).to(torch.bfloat16)
    x = torch.randn(4, 8, 64, dtype=torch.bfloat16)
    ref = lin(x)
    ref.float().square().sum().backward()
    grads = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    out, finals = _compiled(recorder_cls, lambda x: lin(x), x, backward=lambda out: out.float().square().sum().backward())
    assert torch.equal(out, ref)
    for p, g in zip(lin.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    for chain in ("forward", "backward"):
        mats = [b for b in finals[chain].walk() if _is_matmul(b)]
        assert mats and all(p.dtype == "bfloat16" for b in mats for p in b.flat_outputs()), chain
