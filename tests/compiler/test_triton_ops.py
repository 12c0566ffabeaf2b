"""Every op the Triton executor accepts, fused (alone and in chains with broadcasts and reductions),
against eager, under the Triton interpreter, forward and backward.

Programs are traced to ATen with ``make_fx`` (backward ones through ``torch.autograd.grad``) and
compiled with ``executors=["triton"]``; each test also checks the op really ran inside a
Triton fusion kernel, so a silent fallback to torch fails the test.
"""
from __future__ import annotations

import os

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from thundervis.compiler.acquire import fx_to_trace
from thundervis.compiler.fusion_stats import is_fusion
from thundervis.compiler.pipeline import CompileOptions, compile_chain


# A kernel that fails at launch falls back to torch with this warning: here that is a failure.
pytestmark = pytest.mark.filterwarnings("error:thundervis. Triton kernel")


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    old = os.environ.get("THUNDERVIS_CACHE_DIR")
    os.environ["THUNDERVIS_CACHE_DIR"] = str(tmp_path_factory.mktemp("tvcache"))
    yield
    if old is None:
        os.environ.pop("THUNDERVIS_CACHE_DIR", None)
    else:
        os.environ["THUNDERVIS_CACHE_DIR"] = old


def compile_fn(fn, *args, chain="forward"):
    """Return (outputs of the compiled program on ``args``, its final trace)."""
    # functionalize: autograd formulas use in-place ops that AOTAutograd would remove the same way
    gm = make_fx(torch.func.functionalize(fn), tracing_mode="fake")(*args)
    trace = fx_to_trace(gm, chain=chain, graph=0)
    final, run = compile_chain(trace, CompileOptions(executors=["triton"], debug=True))
    out = run(list(args))
    return out, final


def fused_ops(trace) -> set:
    return {s.sym.removeprefix("prims.") for b in trace.symbols if is_fusion(b) for s in b.subsymbols}


def check(fn, *args, ops=(), atol=1e-5, rtol=1e-5, backward=False):
    """Compile ``fn`` (and, with ``backward``, its gradient wrt float inputs), compare with eager and
    check that each op in ``ops`` ran inside a fusion."""
    out, final = compile_fn(fn, *args)
    ref = fn(*args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(out) == len(ref)
    for a, b in zip(out, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, equal_nan=True)
    seen = fused_ops(final)
    if backward:
        xs = [i for i, a in enumerate(args) if a.is_floating_point()]
        grads = [torch.randn_like(r) for r in ref]

        def grad_fn(*a):
            inputs = list(a[:len(args)])

            def of_floats(*fl):
                full = list(inputs)
                for i, t in zip(xs, fl):
                    full[i] = t
                outs = fn(*full)
                return outs if isinstance(outs, tuple) else (outs,)
            _, vjp = torch.func.vjp(of_floats, *[inputs[i] for i in xs])
            return vjp(tuple(a[len(args):]))
        gout, gfinal = compile_fn(grad_fn, *args, *grads, chain="backward")
        gref = grad_fn(*args, *grads)
        for a, b in zip(gout, gref):
            torch.testing.assert_close(a, b, atol=atol * 10, rtol=rtol * 10, equal_nan=True)
        seen |= fused_ops(gfinal)
    missing = set(ops) - seen
    assert not missing, f"not fused: {missing}; fused: {sorted(seen)}"
    return final


torch.manual_seed(0)
X = torch.randn(6, 10)
POS = torch.rand(6, 10) + 0.1
B = torch.randn(10)

UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "exp2": torch.exp2, "log": lambda x: torch.log(x.abs() + 0.1),
    "log2": lambda x: torch.log2(x.abs() + 0.1), "log10": lambda x: torch.log10(x.abs() + 0.1),
    "sin": torch.sin, "cos": torch.cos, "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "reciprocal": lambda x: torch.reciprocal(x + 10), "sigmoid": torch.sigmoid, "erf": torch.erf,
    "floor": lambda x: torch.floor(x * 3), "ceil": lambda x: torch.ceil(x * 3), "trunc": lambda x: torch.trunc(x * 3),
    "round": lambda x: torch.round(x * 4), "sign": torch.sign, "tanh": torch.tanh, "expm1": torch.expm1,
    "log1p": lambda x: torch.log1p(x.abs()),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_alone_and_backward(name):
    prim = {"log": "log", "log2": "log2", "log10": "log10"}.get(name, name)
    x = X.clone()
    if name in ("tanh", "expm1", "log1p"):  # include the small-argument series branch
        x[0, :5] = torch.tensor([1e-4, -3e-3, 0.05, -0.1, 0.12])
    check(UNARY[name], x, ops=[prim], backward=name not in ("floor", "ceil", "trunc", "round", "sign"))


@pytest.mark.parametrize("name,fn", [
    ("add", lambda x, b: x + b), ("sub", lambda x, b: x - 2 * b), ("mul", lambda x, b: x * b),
    ("div", lambda x, b: x / (b.abs() + 1)), ("maximum", torch.maximum), ("minimum", torch.minimum),
    ("add_alpha", lambda x, b: torch.add(x, b, alpha=3)),
])
def test_binary_broadcast_fw_bw(name, fn):
    check(fn, X, B, ops=[name.split("_")[0]], backward=True)


def test_div_rounding_modes():
    check(lambda x, b: torch.div(x * 5, b + 3, rounding_mode="trunc") + torch.div(x * 5, b + 3, rounding_mode="floor"),
          X, B.abs(), ops=["div"])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_division_and_remainders_are_exact_with_torch_signs(dtype):
    # Triton's // and % truncate (C); torch's floor division and remainder follow the divisor's sign
    a = torch.arange(-23, 23, dtype=dtype).view(2, 23)
    b = torch.tensor([-7, -3, -2, -1, 1, 2, 3, 5, 7, 11, -11, 4, -4, 6, -6, 9, -9, 13, -13, 8, -8, 10, -10], dtype=dtype)

    def f(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"), torch.remainder(a, b),
                torch.fmod(a, b), a // 4, a % -3, torch.div(a, -4, rounding_mode="floor"), torch.fmod(a, -3))
    out, final = compile_fn(f, a, b)
    for got, want in zip(out, f(a, b)):
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)
    assert {"div", "remainder", "fmod"} <= fused_ops(final)


def _wide_float_pairs(n: int, seed: int) -> tuple:
    """Float32 pairs whose quotients span the whole range, the special values crossed with each other."""
    special = torch.tensor([1.0, -1.0, 0.0, -0.0, 0.1, -0.1, 4.0, -2.0, 7.5, 1e30, -1e30, 3e-39, 1.4e-45,
                            16777217.0, 3.4e38, float("inf"), float("-inf"), float("nan")])
    gen = torch.Generator().manual_seed(seed)
    a = torch.cat([special.repeat_interleave(len(special)),
                   torch.randn(n, generator=gen) * 10 ** torch.randint(-20, 38, (n,), generator=gen).float()])
    b = torch.cat([special.repeat(len(special)),
                   torch.randn(n, generator=gen) * 10 ** torch.randint(-45, 38, (n,), generator=gen).float()])
    return a, b


def test_float_floor_division_is_torch_s_on_special_and_large_quotients():
    # floor(x / y) is not torch's answer: 1.0 // 0.1 is 9 (0.1 is a little above a tenth); torch
    # floors the exact quotient through fmod, and has its own results for zeros and infinities
    a, b = _wide_float_pairs(3000, 0)

    def f(a, b):
        return torch.div(a, b, rounding_mode="floor"), a // 0.1, torch.div(a, b, rounding_mode="trunc")
    out, final = compile_fn(f, a, b)
    for got, want in zip(out, f(a, b)):
        same = ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (got.isnan() & want.isnan())
        assert same.all(), [(a[i].item(), b[i].item(), got[i].item(), want[i].item()) for i in (~same).nonzero()[:5, 0]]
    assert out[1][a == 1.0].eq(9.0).all()
    assert "div" in fused_ops(final)


def test_float_fmod_and_remainder_are_exact_for_quotients_of_any_size():
    a, b = _wide_float_pairs(4000, 1)

    def f(a, b):
        return torch.fmod(a, b), torch.remainder(a, b), a % 1.0, torch.fmod(a, -3.0)
    out, final = compile_fn(f, a, b)
    assert {"fmod", "remainder"} <= fused_ops(final)
    # torch's CPU fmod is NaN where a / b overflows (CUDA's is exact): those are checked apart
    finite = ~(((a / b).abs() == float("inf")) & (a.abs() < float("inf")) & (b != 0))
    for got, want in zip(out, f(a, b)):
        g, w = got[finite], want[finite]
        same = ((g == w) & (torch.signbit(g) == torch.signbit(w))) | (g.isnan() & w.isnan())
        assert same.all(), [(a[finite][i].item(), b[finite][i].item(), g[i].item(), w[i].item())
                            for i in (~same).nonzero()[:5, 0]]
    import math
    far = (~finite).nonzero()[:, 0]
    assert len(far) > 100
    exact = torch.tensor([math.fmod(a[i].item(), b[i].item()) for i in far.tolist()], dtype=torch.float32)
    assert torch.equal(out[0][far], exact)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_and_where(op):
    f = lambda x, b: torch.where(getattr(torch, op)(x, b), x, b * 2)  # noqa: E731
    check(f, X.round(), B.round(), ops=[op, "where"], backward=True)


def test_logical_and_bitwise_on_bool_and_int():
    def f(x, b):
        m = (x > 0) & (b < 0.5) | ~(x < -1)
        n = torch.logical_xor(x > 0, b > 0) ^ torch.logical_not(x > 1)
        i = x.to(torch.int64)
        return m, n, (i & 3) | (i ^ 1), ~i, torch.logical_and(m, n) | torch.logical_or(x > 2, b > 2)
    check(f, X * 3, B, ops=["bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "logical_xor",
                            "logical_not", "logical_and", "logical_or", "convert_element_type"])


def test_clamp_pow_isnan():
    def f(x, b):
        y = torch.clamp(x, -0.5, 0.7) + x.clamp(min=b) + x.pow(2) + x.abs().pow(0.5) + x.pow(3) + x.abs().pow(1.7)
        return y + torch.isnan(x / 0).to(x.dtype) + 2.0 ** x + x.pow(5) + (x + 0.5).pow(-1)
    check(f, X, B, ops=["clamp", "pow", "isnan"], backward=True, rtol=1e-4, atol=1e-5)


def test_conversions_and_int_arithmetic():
    def f(x):
        i = (x * 10).to(torch.int64)
        return (i * 3 + 1).to(torch.float32) / 7, (x > 0).to(torch.int32) + 2, i.abs() - i.neg(), x.to(torch.bool)
    check(f, X, ops=["convert_element_type", "mul", "add", "abs"])


def test_nan_and_inf_propagate():
    x = X.clone()
    x[1, 3] = float("nan")
    x[2, 2] = float("inf")
    check(lambda x: (torch.maximum(x, x * 0), torch.amax(x, -1), torch.exp(x) * 0 + 1), x, ops=["maximum", "amax"])


@pytest.mark.parametrize("name,fn", [
    ("sum_inner", lambda x: x.sum(-1)), ("sum_outer", lambda x: x.sum(0)), ("sum_full", lambda x: x.sum()),
    ("amax", lambda x: x.amax(-1, keepdim=True)), ("amin", lambda x: x.amin(0)),
    ("mean", lambda x: x.mean(-1)), ("var", lambda x: x.var(-1)), ("var_outer", lambda x: x.var(0, correction=0)),
    ("sum_3d_inner2", lambda x: x.view(3, 2, 10).sum((1, 2))), ("sum_3d_outer2", lambda x: x.view(3, 2, 10).sum((0, 1))),
])
def test_reductions_fw_bw(name, fn):
    prim = name.split("_")[0]
    check(lambda x: fn(x * 2 + 1), X, ops=[prim, "mul"], backward=name not in ("amax", "amin"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fn", [
    ("any", lambda x: (x > 3).any(-1)), ("all", lambda x: (x > -2).all(0)), ("any", lambda x: x.any()),
    ("all", lambda x: (x * 0).all(-1, keepdim=True)), ("any", lambda x: (x - x).view(3, 2, 10).any((1, 2))),
])
def test_any_and_all_reduce_nonzero_values_in_the_kernel(name, fn):
    """any/all reduce the truth of their values (a float's nonzero, NaN included) in the kernel,
    inner, outer and full, not on torch."""
    x = X.clone()
    x[1, 4] = float("nan")
    check(lambda x: fn(x * 2 + 1), x, ops=[name, "mul"])


def test_reductions_over_dims_apart_read_their_input_permuted_in_the_kernel():
    """A reduction over middle or scattered dims (``x.mean(1)`` of ``[B, T, C]``, BatchNorm's sums
    over ``[0, 2, 3]``, keepdim or not, var and any too) reduces the permuted input's trailing dims
    in the kernel; forward and BatchNorm's backward."""
    x, img = torch.randn(4, 6, 5), torch.randn(4, 8, 6, 6)
    check(lambda x: (x.mean(1), x.sum(1, keepdim=True) * 2, (x > 0).any(1)), x, ops=["mean", "sum", "any", "mul"])
    check(lambda y: (y.sum((0, 2, 3)), y.var((0, 2, 3), correction=0, keepdim=True)), img, ops=["sum", "var"])
    w, b = torch.randn(8), torch.randn(8)
    check(lambda y, w, b: torch.nn.functional.batch_norm(y, None, None, w, b, training=True), img, w, b,
          ops=["sum"], backward=True, atol=1e-4, rtol=1e-4)


def test_argmax_and_argmin_give_torch_s_first_index_nan_included():
    x = X.clone()
    x[1, 3] = x[1, 7] = float("nan")  # the first NaN wins, for argmin too
    x[2, :] = float("-inf")
    x[3, 8] = x[3, 2] = x[3].max() + 1  # a tie: the first index
    x[4, :] = float("nan")
    i = torch.randint(-5, 5, (6, 10), generator=torch.Generator().manual_seed(0))

    def f(x, i):
        return (x.argmax(-1), x.argmin(-1), x.argmax(0), x.argmin(0, keepdim=True), x.argmax(), (x * 2).argmax(1, keepdim=True),
                i.argmax(-1), i.argmin(0), x.view(2, 3, 10).argmax(1))
    out, final = compile_fn(f, x, i)
    for got, want in zip(out, f(x, i)):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), (got, want)
    assert not [b.sym for b in final.symbols if b.sym.startswith("prims.arg")]  # all nine in kernels
    assert {"argmax", "argmin"} <= fused_ops(final)


def _bn_backward_like(x, g, mean):
    """BatchNorm's backward shape of work: sums over [0, 2, 3] of values computed from the inputs
    (a ReLU mask, a product), then a full-size result that reads them."""
    y = torch.where(x > 0, g, 0.0)
    centered = x - mean
    s1 = y.sum((0, 2, 3), keepdim=True)
    s2 = (y * centered).sum((0, 2, 3), keepdim=True)
    n = x.numel() / x.shape[1]
    return y * 2.0 - (s1 + centered * s2 / n) / n, s1.flatten(), (y * centered).sum((0, 2, 3))


def test_a_reduction_over_dims_apart_of_computed_values_runs_in_their_permuted_frame():
    """Sums over [0, 2, 3] of values the kernel computes (not inputs) are reduced with their
    producers in one kernel, iterating in the permuted order, outputs stored where their layout
    puts them; before, each producer was a kernel of its own."""
    g = torch.Generator().manual_seed(0)
    x, grad = torch.randn(4, 3, 5, 6, generator=g), torch.randn(4, 3, 5, 6, generator=g)
    mean = torch.randn(1, 3, 1, 1, generator=g)
    out, final = compile_fn(_bn_backward_like, x, grad, mean)
    for got, want in zip(out, _bn_backward_like(x, grad, mean)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    fusions = [b for b in final.symbols if b.fusion]
    assert len(fusions) == 1 and {"sum", "where", "sub"} <= fused_ops(final)
    out, final = compile_fn(_bn_backward_like, x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2), grad, mean)
    torch.testing.assert_close(out[0], _bn_backward_like(x, grad, mean)[0], rtol=1e-5, atol=1e-5)  # a channels-last input
    # BatchNorm's training forward: statistics, normalization, the affine weights (rank 1, broadcast
    # against the trailing dims) and a ReLU in one kernel
    w, b = torch.randn(3, generator=g), torch.randn(3, generator=g)

    def bn_relu(x, w, b):
        return torch.relu(torch.nn.functional.batch_norm(x, None, None, w, b, training=True))
    out, final = compile_fn(bn_relu, x, w, b)
    torch.testing.assert_close(out[0], bn_relu(x, w, b), rtol=1e-5, atol=1e-5)
    assert len([b for b in final.symbols if b.fusion]) == 1


def test_softmax_over_channels_of_a_large_tensor_is_one_kernel():
    """Softmax and log-softmax over dim 1 of [N, C, H, W] (segmentation heads) past the phase
    limit: max, exp and sum of the exponentials reduce over the channels in the permuted frame,
    in one kernel (before: one kernel per reduction and per producer, 5 for softmax)."""
    x = torch.randn(4, 5, 64, 64, generator=torch.Generator().manual_seed(0))  # 81920 elements
    for f in (lambda x: torch.softmax(x * 2, 1), lambda x: torch.log_softmax(x, 1) * 3):
        out, final = compile_fn(f, x)
        torch.testing.assert_close(out[0], f(x), rtol=1e-5, atol=1e-5)
        assert len([b for b in final.symbols if b.fusion]) == 1


def test_bool_sum_to_int():
    check(lambda x: (x > 0).sum(-1) + (x > 0).sum(), X, ops=["sum"])


def test_softmax_logsoftmax_layernorm_fw_bw():
    w, b = torch.randn(10), torch.randn(10)
    check(lambda x: torch.softmax(x, -1), X, ops=["amax", "exp", "sum", "div"], backward=True)
    check(lambda x: torch.log_softmax(x * 3, -1), X, ops=["amax", "log", "sub"], backward=True)
    check(lambda x, w, b: torch.nn.functional.layer_norm(x, (10,), w, b), X, w, b, ops=["var", "rsqrt"],
          backward=True, atol=1e-5, rtol=1e-4)


def test_cross_entropy_fw_bw():
    def f(x, target):
        return torch.nn.functional.cross_entropy(x, target)
    check(f, X, torch.randint(0, 10, (6,)), ops=["amax", "sum", "neg"], backward=True)


def test_gelu_chain_with_broadcast_and_reduction():
    def f(x, b):
        h = torch.nn.functional.gelu(x + b) * torch.sigmoid(x)
        return h - h.mean(-1, keepdim=True), (h * h).sum(0)
    final = check(f, X, B, ops=["erf", "mul", "mean", "sigmoid"], backward=True)
    assert sum(1 for s in final.symbols if is_fusion(s)) <= 2


def test_views_permutes_and_expand_of_inputs_are_read_in_place():
    def f(x, b):
        t = x.t()  # permuted input
        e = b.view(10, 1).expand(10, 6)  # broadcast view
        s = x[:, 2:7]  # offset view (a torch slice feeding the kernel)
        return (t * e + 1).contiguous(), s.exp() * 2, x.view(2, 3, 10).permute(2, 0, 1).clone()
    check(f, X, B, ops=["permute", "expand", "mul", "clone", "exp"], backward=True)


def test_non_contiguous_runtime_input_is_copied_into_recorded_layout():
    out, final = compile_fn(lambda x: torch.exp(x) + 1, X)
    fusion = next(b for b in final.symbols if is_fusion(b))
    from thundervis.compiler.executors import get_executor
    launch = get_executor("triton").callable_for(fusion)
    strided = torch.randn(10, 6).t()  # same shape, other strides than recorded
    (got,) = launch(strided)
    torch.testing.assert_close(got, torch.exp(strided) + 1)


def test_runtime_input_is_copied_into_a_recorded_layout_with_gaps():
    # Fake strides can differ from the real kernel's: GPT-2's attention backward recorded q's gradient
    # as a slice of the qkv buffer (gaps between rows) but CPU's kernel returned it dense.
    from thundervis.compiler.executors import get_executor
    view = torch.randn(4, 30)[:, 5:15]  # strides (30, 1): not dense
    out, final = compile_fn(lambda x: torch.exp(x) + 1, view)
    fusion = next(b for b in final.symbols if is_fusion(b))
    assert tuple(fusion.args[0].strides) == (30, 1)
    launch = get_executor("triton").callable_for(fusion)
    dense = torch.randn(4, 10)
    (got,) = launch(dense)
    torch.testing.assert_close(got, torch.exp(dense) + 1)


def test_runtime_input_cannot_be_copied_into_a_recorded_broadcast():
    from thundervis.compiler.executors import get_executor
    out, final = compile_fn(lambda x: torch.exp(x) + 1, torch.randn(1, 10).expand(4, 10))
    fusion = next(b for b in final.symbols if is_fusion(b))
    assert tuple(fusion.args[0].strides) == (0, 1)
    x = torch.randn(4, 10)
    with pytest.warns(UserWarning, match=r"differ from the recorded \(0, 1\)\); its region runs in torch"):
        (got,) = get_executor("triton").callable_for(fusion)(x)
    torch.testing.assert_close(got, torch.exp(x) + 1)


def test_full_and_scalar_tensor_constants():
    def f(x):
        return torch.where(x > 0, x, torch.full_like(x, -2.0)), x.masked_fill(x < 0, float("-inf"))
    check(f, X, ops=["where"])


def test_row_value_broadcast_against_other_shape_is_refused_not_miscompiled():
    # the row-mean of a [6, 10] tensor added along the other axis must not be fused wrongly
    def f(x):
        m = x.mean(-1)  # [6]
        return x.t()[:6, :6] + m, x - x.mean(-1, keepdim=True)
    out, final = compile_fn(f, torch.randn(6, 10))
    x = torch.randn(6, 10)
    got, _ = compile_fn(f, x)
    for a, b in zip(got, f(x)):
        torch.testing.assert_close(a, b)


# ---------------------------------------------------------------- indexing ops and multi-part kernels

def _grad_program(fn, *args):
    """Return (compiled gradient outputs, eager ones, final backward trace) of sum(fn(*args) * g)."""
    xs = [i for i, a in enumerate(args) if a.is_floating_point()]
    g = torch.randn_like(fn(*args))

    def grad_fn(*a):
        inputs, grad = list(a[:-1]), a[-1]

        def of_floats(*fl):
            full = list(inputs)
            for i, t in zip(xs, fl):
                full[i] = t
            return fn(*full)
        _, vjp = torch.func.vjp(of_floats, *[inputs[i] for i in xs])
        return vjp(grad)
    out, final = compile_fn(grad_fn, *args, g, chain="backward")
    return out, grad_fn(*args, g), final


def test_embedding_forward_and_its_index_put_backward():
    w, idx = torch.randn(7, 6), torch.tensor([[0, 3, 3, 6], [1, 3, 0, 0]])

    def f(w, idx):
        return torch.nn.functional.embedding(idx, w) * 2 + torch.arange(6)
    final = check(f, w, idx, ops=["aten.embedding.default", "arange", "mul"])
    assert not [b for b in final.symbols if not is_fusion(b) and b.sym != "del"], "everything runs in one kernel"
    out, ref, bw = _grad_program(f, w, idx)
    torch.testing.assert_close(out[0], ref[0])  # repeated indices accumulate (atomic adds)
    assert "index_put" in fused_ops(bw)
    assert [b.sym for b in bw.symbols if is_fusion(b)] == ["bw_fusion_0"]


def test_split_cat_gather_scatter_fw_bw():
    x, target = torch.randn(6, 12), torch.randint(0, 4, (6,))

    def f(x, target):
        a, b, c = x.split(4, dim=1)
        y = torch.cat([c.exp(), a * 2, b.t().t()], dim=1)
        return torch.nn.functional.cross_entropy(y[:, :4], target) + y.sum()
    check(f, x, target, ops=["slice", "cat", "gather", "exp"], backward=True)
    out, ref, bw = _grad_program(f, x, target)
    torch.testing.assert_close(out[0], ref[0], rtol=1e-5, atol=1e-5)
    assert {"scatter", "slice"} <= fused_ops(bw) or {"scatter", "cat"} <= fused_ops(bw)


def test_scatter_add_adds_through_atomics_in_a_phase_of_its_own():
    """``scatter_add`` (and ``scatter_reduce`` sum/mean, gather's backward) copies ``self`` and adds
    ``src`` at the loaded indices in the kernel; a source larger than the index is read in place."""
    g = torch.Generator().manual_seed(0)
    x, src = torch.randn(5, 7, generator=g), torch.randn(6, 9, generator=g)
    idx0, idx1 = torch.randint(0, 5, (4, 7), generator=g), torch.randint(0, 7, (5, 3), generator=g)

    def f(x, src, idx0, idx1):
        return (torch.scatter_add(x, 0, idx0, src), torch.scatter_add(x * 2, 1, idx1, src[:5, :3] + 1),
                torch.zeros(10).scatter_add(0, idx0.flatten(), src[:4, :7].flatten()),
                torch.scatter_reduce(x, 1, idx1, src[:5, :3], "mean"),
                torch.zeros(5, 7, dtype=torch.int32).scatter_add(0, idx0, (idx0 * 3).to(torch.int32)))
    out, final = compile_fn(f, x, src, idx0, idx1)
    for got, want in zip(out, f(x, src, idx0, idx1)):
        torch.testing.assert_close(got, want)
    assert not [b.sym for b in final.symbols if "scatter" in b.sym]  # all of them in kernels
    assert "scatter_add" in fused_ops(final)
    check(lambda x, i: torch.gather(x * 3, 1, i).sum(), x, idx1, ops=["gather"], backward=True)
    _, _, bw = _grad_program(lambda x, i: torch.gather(x * 3, 1, i).sum(), x, idx1)
    assert "scatter_add" in fused_ops(bw)
    # past the phase limit it stays with torch, saying so
    big = torch.randint(0, 300, (300, 300), generator=g)
    out, final = compile_fn(lambda s, i: torch.zeros(300, 300).scatter_add(0, i, s), torch.randn(300, 300), big)
    (left,) = [b for b in final.symbols if b.sym == "prims.scatter_add"]
    assert left.executor == "torch" and "at most 65536 elements" in left.note


def test_index_put_with_several_broadcast_index_tensors_writes_in_the_kernel():
    """``out[:, :, i, j] = v`` / ``+= v`` with index tensors broadcast together (interpolate's
    backward writes so), a negative index counted from the end."""
    g = torch.Generator().manual_seed(0)
    x, vals = torch.randn(2, 3, 8, 8, generator=g), torch.randn(2, 3, 5, 6, generator=g)
    ih, iw = torch.randint(-4, 4, (5, 1), generator=g), torch.randint(0, 8, (6,), generator=g)

    def f(x, vals, ih, iw):
        return (torch.ops.aten.index_put(x, [None, None, ih, iw], vals, True),
                torch.ops.aten.index_put(x * 2, [None, None, ih, ih.flatten()[:1]], vals[..., :1] + 1, False),
                torch.ops.aten.index_put(x[0, 0], [ih.flatten(), iw[:5]], vals[0, 0, :, 0], True))
    out, final = compile_fn(f, x, vals, ih, iw)
    for got, want in zip(out, f(x, vals, ih, iw)):
        torch.testing.assert_close(got, want)
    assert not [b.sym for b in final.symbols if b.sym == "prims.index_put"]  # all three in kernels

    from thundervis.compiler.backend import ThundervisCompiler
    from thundervis.compiler.observer import CompileObserver

    class Kept(CompileObserver):
        def __init__(self):
            self.kernels = []

        def kernels_built(self, graph, chain, kernels):
            self.kernels += [(chain, k) for k in kernels]
    torch._dynamo.reset()
    kept = Kept()
    xg = x.clone().requires_grad_(True)
    up = lambda t: torch.nn.functional.interpolate(t * 2, scale_factor=2, mode="bilinear").sum()  # noqa: E731
    torch.compile(up, backend=ThundervisCompiler(executors=["triton"], observer=kept))(xg).backward()
    want = x.clone().requires_grad_(True)
    up(want).backward()
    torch.testing.assert_close(xg.grad, want.grad)
    puts = [s for chain, k in kept.kernels if chain == "backward" for s in k.region.symbols if s.sym == "prims.index_put"]
    assert len(puts) == 4  # the four corners' gradients, added in the kernel


def test_an_index_out_of_range_never_reads_or_writes_outside_the_tensor():
    """Eager raises on an index out of range; a kernel must not touch memory outside the tensor
    (an atomic add there would corrupt another tensor): the read gives 0, the write is skipped,
    and the kernel asserts it (active with TRITON_DEBUG=1 on a GPU)."""
    w, x = torch.randn(10, 4), torch.randn(6, 5)
    idx = torch.tensor([[0, 3, 12], [9, -20, 1]])  # 12 and -20 are out of range
    gi = torch.tensor([[0, 7], [1, 2], [4, -1], [0, 0], [1, 1], [2, 2]])  # 7 and -1 too (gather has no wrap)

    def f(w, x, idx, gi):
        return (torch.nn.functional.embedding(idx, w * 2), torch.gather(x * 2, 1, gi),
                torch.zeros(5).index_put([idx.flatten()], torch.ones(6), True) * 2,
                torch.zeros(6, 5).scatter_add(1, gi, x[:, :2] + 1))
    out, final = compile_fn(f, w, x, idx, gi)
    assert {"aten.embedding.default", "gather", "index_put", "scatter_add"} <= fused_ops(final)
    emb, gat, put, sca = out
    torch.testing.assert_close(emb[0, :2], w[[0, 3]] * 2)
    assert emb[0, 2].eq(0).all() and emb[1, 1].eq(0).all()
    assert gat[0, 1] == 0 and gat[2, 1] == 0 and gat[1, 1] == x[1, 2] * 2
    assert put.tolist() == [2.0, 2.0, 0.0, 2.0, 0.0]  # 0, 3, 9 (out of range in 5), 1: 12, -20 skipped
    assert sca[0, 0] == x[0, 0] + 1 and sca[0].abs().sum() == (x[0, 0] + 1).abs()  # index 7 skipped
    from thundervis.compiler.executors.triton_plan import generate
    fusion = next(b for b in final.symbols if b.fusion)
    source = generate(list(fusion.subsymbols), list(fusion.outputs), "cuda").source
    assert source.count("tl.device_assert(") >= 4


def test_select_reads_one_index_of_a_dim_in_the_kernel():
    """``x[i]`` / ``x[:, -1]`` / ``unbind`` (prims.select) read the input in place inside the kernel,
    negative indices counted from the end, forward and backward (the gradient's select_backward
    is a scatter into zeros)."""
    x = torch.randn(3, 4, 5)

    def f(x):
        q, k, v = (x * 2).unbind(0)  # selects of a computed value: a kernel of their own each
        return x[1] * 3 + x[:, -1, :].sum(0), x[..., 0].exp(), q + k * v
    check(f, x, ops=["select", "mul", "exp"], backward=True)


def test_integer_indexing_reads_the_input_in_place_in_the_kernel():
    """``x[:, i]``, ``x[i, j]`` with broadcast index tensors, negative indices, and the gather
    that nearest and linear interpolation make (``_unsafe_index``) run in the kernel; indices on
    dims apart or boolean masks stay with torch."""
    x = torch.randn(4, 6, 5)
    i = torch.tensor([[0, 5], [-1, 2]])
    j = torch.tensor([1, -2])

    check(lambda x, i, j: (x[:, i] * 2, x[i[:, :1], j] + 1), x, i, j, ops=["index", "mul", "add"])
    img = torch.randn(2, 3, 5, 7)
    check(lambda y: torch.nn.functional.interpolate(y * 1.5, scale_factor=2, mode="nearest"), img,
          ops=["index", "mul"], backward=True)
    out, final = compile_fn(lambda x, i: x[i, :, i] + 1, x, i[:, 0].clone())  # dims apart: torch
    torch.testing.assert_close(out[0], x[i[:, 0], :, i[:, 0]] + 1)
    assert "index" not in fused_ops(final)


def test_constant_pad_reads_inside_the_input_and_writes_the_value_around_it():
    """``F.pad`` with a constant (zero, a number, -inf) on one or several dims runs in the kernel,
    alone and feeding a computation, forward and backward; a negative pad (a crop) stays with
    torch."""
    x = torch.randn(3, 4, 5)
    pad = torch.nn.functional.pad
    check(lambda x: (pad(x * 2, (1, 2)), pad(x, (0, 1, 2, 0), value=-1.5).exp(),
                     pad(x, (1, 1, 1, 1, 1, 1), value=float("-inf")).amax(-1)), x,
          ops=["constant_pad_nd", "mul", "exp", "amax"])
    check(lambda x: pad(x.tanh(), (2, 1)).sum(-1), x, ops=["constant_pad_nd", "tanh", "sum"], backward=True)
    out, final = compile_fn(lambda x: pad(x, (-1, 1)) + 1, x)
    torch.testing.assert_close(out[0], pad(x, (-1, 1)) + 1)
    assert "constant_pad_nd" not in fused_ops(final)


def test_dependent_reductions_of_other_layouts_run_as_phases_of_one_kernel():
    # layer-norm backward: row reductions, then column sums for the weight and bias gradients
    x, w, b = torch.randn(8, 16), torch.randn(16), torch.randn(16)

    def f(x, w, b):
        return torch.nn.functional.layer_norm(x, (16,), w, b).tanh()
    out, ref, bw = _grad_program(f, x, w, b)
    for a, r in zip(out, ref):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-5)
    fusions = [s for s in bw.symbols if is_fusion(s)]
    assert len(fusions) == 1 and {"sum", "tanh"} <= fused_ops(bw)
    from thundervis.compiler.executors import get_executor
    code = get_executor("triton").build_kernel(fusions[0]).code
    assert "phases in one program" in code and "tl.debug_barrier()" in code


def test_qkv_style_transposes_share_one_kernel():
    # three independent permuted copies of slices of one input: one kernel reading them in place
    x = torch.randn(2, 4, 12)

    def f(x):
        q, k, v = x.split(4, dim=2)
        return q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous() * 2, v.permute(2, 0, 1).contiguous()
    final = check(f, x, ops=["slice", "permute", "clone"])
    assert len([b for b in final.symbols if is_fusion(b)]) == 1


def test_independent_pieces_of_other_domains_run_as_sections():
    x, y = torch.randn(6, 10), torch.randn(3, 5)
    final = check(lambda x, y: (x.sum(-1), y.exp() * 2), x, y, ops=["sum", "exp"])
    (fusion,) = [b for b in final.symbols if is_fusion(b)]
    from thundervis.compiler.executors import get_executor
    assert get_executor("triton").build_kernel(fusion).details["plan"] == "sections"
