"""The simplify rules that need context: cancelling transposes, detach/alias, unobservable clones,
and moving a returned name onto the symbol that made the value. Each case checks the result
against the interpreter, and the look-alikes that must stay."""
from __future__ import annotations

import torch

from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy
from thundervis.compiler.passes.dce import dce
from thundervis.compiler.passes.simplify import returns_alias, simplify, transpose_perm


def _contiguous(shape):
    strides, n = [], 1
    for s in reversed(shape):
        strides.append(n)
        n *= s
    return tuple(reversed(strides))


def P(name, shape=(2, 3), strides="contiguous"):
    if strides == "contiguous":
        strides = _contiguous(shape)
    return TensorProxy(name, tuple(shape), "float32", "cpu", strides)


def S(sym, args, out, uid, aten=None, kwargs=None):
    return BoundSymbol(sym=sym, args=tuple(args), kwargs=kwargs or {}, outputs=out, uid=uid, aten=aten)


def T(inputs, symbols, outputs, chain="backward"):
    return Trace(name=chain, inputs=tuple(inputs), symbols=tuple(symbols), outputs=tuple(outputs),
                 chain=chain, next_uid=100, next_name=100)


def _mm(a, b, out, uid):
    return S("prims.mm", [a, b], out, uid, aten="aten.mm.default")


def _t(x, out, uid):
    return S("aten.t.default", [x], out, uid)


def _same_results(before: Trace, after: Trace, args) -> None:
    for got, want in zip(run_trace(after, args), run_trace(before, args)):
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride()


def test_cancelling_transposes_move_the_returned_name_onto_the_matmul():
    # The backward of a linear layer: the weight gradient is t(t(mm(...))) and is returned.
    a, b = P("a", (3, 2)), P("b", (2, 4))
    g, u, y = P("g", (3, 4)), P("u", (4, 3)), P("y", (3, 4))
    t = T([a, b], [_mm(a, b, g, "b0"), _t(g, u, "b1"), _t(u, y, "b2")], [y])
    out = dce(simplify(t))
    assert [s.uid for s in out.symbols] == ["b0"]
    assert out.symbols[0].outputs.name == "y" and out.outputs == (y,)
    args = [torch.randn(3, 2), torch.randn(2, 4)]
    _same_results(t, out, args)


def test_cancelling_transposes_inside_the_trace_rewire_readers():
    x, u, y, z = P("x", (3, 4)), P("u", (4, 3)), P("y", (3, 4)), P("z", (3, 4))
    t = T([x], [S("aten.transpose.int", [x, 0, 1], u, "b0"), S("aten.permute.default", [u, [1, 0]], y, "b1"),
                S("prims.exp", [y], z, "b2", aten="aten.exp.default")], [z])
    out = dce(simplify(t))
    assert [s.uid for s in out.symbols] == ["b2"] and out.symbols[0].args[0].name == "x"
    _same_results(t, out, [torch.randn(3, 4)])


def test_transposes_that_do_not_cancel_or_have_other_readers_stay():
    x, u, y = P("x", (2, 3, 4)), P("u", (3, 2, 4), None), P("y", (3, 4, 2), None)
    t = T([x], [S("aten.transpose.int", [x, 0, 1], u, "b0"), S("aten.transpose.int", [u, 1, 2], y, "b1")], [y])
    assert simplify(t) is t
    # The first transpose is also returned: the second cannot take the matmul's name.
    a, b = P("a", (3, 2)), P("b", (2, 4))
    g, u2, y2 = P("g", (3, 4)), P("u", (4, 3)), P("y", (3, 4))
    t2 = T([a, b], [_mm(a, b, g, "b0"), _t(g, u2, "b1"), _t(u2, y2, "b2")], [y2, u2])
    assert [s.uid for s in simplify(t2).symbols] == ["b0", "b1", "b2"]


def test_transpose_perm_reads_each_spelling():
    x = P("x", (2, 3, 4))
    assert transpose_perm(S("aten.transpose.int", [x, -1, 0], P("y", (4, 3, 2), None), "b0")) == [2, 1, 0]
    assert transpose_perm(S("prims.permute", [x, [1, 2, 0]], P("y", (3, 4, 2), None), "b0")) == [1, 2, 0]
    assert transpose_perm(_t(P("v", (5,)), P("w", (5,)), "b0")) == [0]
    assert transpose_perm(S("prims.exp", [x], P("y", (2, 3, 4)), "b0")) is None


def test_detach_of_a_saved_tensor_is_read_through():
    d, y, z = P("detach_2"), P("y"), P("z")
    t = T([d], [S("aten.detach.default", [d], y, "b0"), S("prims.exp", [y], z, "b1", aten="aten.exp.default")], [z])
    out = simplify(t)
    assert [s.uid for s in out.symbols] == ["b1"] and out.symbols[0].args[0] is d
    _same_results(t, out, [torch.randn(2, 3)])


def _dropout_zero(x_maker_sym="prims.add", extra_reader=False, clone_kwargs=None, returned_x=False):
    a, b, x, y, z = P("a"), P("b"), P("x"), P("y"), P("z")
    syms = [S(x_maker_sym, [a, b], x, "f0", aten="aten.add.Tensor"),
            S("prims.clone", [x], y, "f1", aten="aten.clone.default", kwargs=clone_kwargs)]
    outs = [y]
    if extra_reader:
        syms.append(S("aten.detach.default", [x], z, "f2"))
        outs.append(z)
    if returned_x:
        outs.append(x)
    return T([a, b], syms, outs, chain="forward")


def test_a_clone_nobody_can_tell_from_its_source_goes():
    t = _dropout_zero()
    out = simplify(t)
    assert [s.uid for s in out.symbols] == ["f0"] and out.symbols[0].outputs.name == "y"
    _same_results(t, out, [torch.randn(2, 3), torch.randn(2, 3)])
    t2 = _dropout_zero(clone_kwargs={"memory_format": torch.contiguous_format})
    assert [s.uid for s in simplify(t2).symbols] == ["f0"]


def test_a_clone_whose_source_is_seen_elsewhere_stays():
    assert simplify(_dropout_zero(extra_reader=True)) == _dropout_zero(extra_reader=True)
    assert simplify(_dropout_zero(returned_x=True)) == _dropout_zero(returned_x=True)
    # A clone of a trace input protects the caller's tensor.
    a, y = P("a"), P("y")
    t = T([a], [S("prims.clone", [a], y, "f0", aten="aten.clone.default")], [y], chain="forward")
    assert simplify(t) is t


def test_a_clone_that_changes_layout_stays():
    a, x, y = P("a", (3, 2)), P("x", (2, 3), (1, 2)), P("y", (2, 3))
    t = T([a], [S("aten.t.default", [a], x, "f0"),
                S("prims.clone", [x], y, "f1", aten="aten.clone.default",
                  kwargs={"memory_format": torch.contiguous_format})], [y], chain="forward")
    assert simplify(t) is t


def test_a_clone_of_a_view_of_a_private_value_goes_and_the_view_takes_its_name():
    # resid_drop(proj(y)) with p=0: clone(view(addmm(...))).
    a, b, m, v, y = P("a", (6,)), P("b", (6,)), P("m", (6,)), P("v"), P("y")
    syms = [S("prims.add", [a, b], m, "f0", aten="aten.add.Tensor"),
            S("prims.view", [m, [2, 3]], v, "f1", aten="aten.view.default"),
            S("prims.clone", [v], y, "f2", aten="aten.clone.default")]
    t = T([a, b], syms, [y], chain="forward")
    out = simplify(t)
    assert [s.uid for s in out.symbols] == ["f0", "f1"] and out.symbols[1].outputs.name == "y"
    _same_results(t, out, [torch.randn(6), torch.randn(6)])
    # The same with the view's source returned: the clone must stay.
    t2 = T([a, b], syms, [y, m], chain="forward")
    assert simplify(t2) is t2


def test_returns_alias_uses_the_schema():
    x, y = P("x"), P("y")
    assert returns_alias(S("prims.view", [x, [3, 2]], P("y", (3, 2)), "f0", aten="aten.view.default"))
    assert not returns_alias(S("prims.exp", [x], y, "f0", aten="aten.exp.default"))
    assert returns_alias(S("my.custom_op", [x], y, "f0"))  # unknown: assumed to alias


def test_gpt_step_matches_eager_after_simplify(example):
    """End to end: the example GPT's forward and backward lose the cancelling transposes and the
    dropout(p=0) copies, and its loss and gradients still match eager."""
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.observer import CompileObserver

    class Keep(CompileObserver):
        def __init__(self):
            self.traces = {}

        def pass_done(self, graph, chain, index, name, trace, seconds, changed):
            self.traces[(chain, name)] = trace

    gpt = example("train_gpt")
    model, batches = gpt.build(0)
    ref, _ = gpt.build(0)
    obs = Keep()
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=["torch"], observer=obs), dynamic=False)
    x, y = batches[0]
    _, loss = compiled(x, y)
    loss.backward()
    _, ref_loss = ref(x, y)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)
    before, after = obs.traces[("backward", "cse")], obs.traces[("backward", "dce")]
    n_t = [sum(b.sym == "aten.t.default" for b in tr.symbols) for tr in (before, after)]
    assert n_t[1] < n_t[0]
    fw_before, fw_after = obs.traces[("forward", "cse")], obs.traces[("forward", "dce")]
    n_clone = [sum(b.sym == "prims.clone" for b in tr.symbols) for tr in (fw_before, fw_after)]
    assert n_clone[1] < n_clone[0]


def test_a_new_tensor_is_not_replaced_by_its_source_where_a_view_of_it_is_returned():
    # y = x * 1 is a new tensor; z = y.view(...) is returned. Reading x instead would return a
    # view of the caller's input.
    x, y, z, w = P("x"), P("y"), P("z", (6,)), P("w")
    keep_mul = T([x], [S("prims.mul", [x, 1], y, "f0", aten="aten.mul.Tensor"),
                       S("prims.view", [y, [6]], z, "f1", aten="aten.view.default")], [z], chain="forward")
    assert simplify(keep_mul) is keep_mul
    # Read by a computation only, it goes.
    drop_mul = T([x], [S("prims.mul", [x, 1], y, "f0", aten="aten.mul.Tensor"),
                       S("prims.exp", [y], w, "f1", aten="aten.exp.default")], [w], chain="forward")
    out = simplify(drop_mul)
    assert [s.uid for s in out.symbols] == ["f1"] and out.symbols[0].args[0] is x
    # A view identity of an input is a view either way: readers may read the input.
    v = P("v")
    view_id = T([x], [S("prims.view", [x, [2, 3]], v, "f0", aten="aten.view.default"),
                      S("prims.view", [v, [6]], z, "f1", aten="aten.view.default")], [z], chain="forward")
    out = simplify(view_id)
    assert [s.uid for s in out.symbols] == ["f1"] and out.symbols[0].args[0] is x


def test_a_clone_of_one_piece_of_a_split_stays():
    # The other pieces share the storage (and its version counter): the copy is observable.
    a, b, m = P("a", (2, 6)), P("b", (2, 6)), P("m", (2, 6))
    p0, p1, y = P("p0", (2, 3), (6, 1)), P("p1", (2, 3), (6, 1)), P("y", (2, 3), (6, 1))
    syms = [S("prims.add", [a, b], m, "f0", aten="aten.add.Tensor"),
            S("aten.split.Tensor", [m, 3, 1], (p0, p1), "f1"),
            S("prims.clone", [p0], y, "f2", aten="aten.clone.default")]
    t = T([a, b], syms, [y, p1], chain="forward")
    assert simplify(t) is t
