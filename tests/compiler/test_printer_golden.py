"""Golden printed traces: the printer's settings on a hand-built trace (independent of torch), and
every pass of a tiny model's forward and backward chains (keyed by torch version, because the graphs
AOTAutograd hands over differ between releases). ``THUNDERVIS_UPDATE_GOLDEN=1`` rewrites them."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn as nn

from thundervis.compiler import PrintOptions, ThundervisCompiler, print_trace
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.ir import BoundSymbol, SourceInfo, Trace, TensorProxy


class Tiny(nn.Module):
    """Linear -> LayerNorm -> GELU -> sum: a lowered op, a prim, a multi-output op, a reduction."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        h = self.norm(self.fc(x))
        return torch.nn.functional.gelu(h).sum()


def P(name, shape, dtype="float32"):
    return TensorProxy(name, tuple(shape), dtype, "cpu", None)


SRC_A = SourceInfo("/home/someone/project/model.py", 14, "h = self.act(self.fc1(x))", "layers.0.fc1", "forward")
SRC_B = SourceInfo("/tmp/elsewhere/model.py", 15, "return h.sum()", "", "forward")


def hand_built() -> Trace:
    x, w, b = P("x", (8, 4)), P("w", (4, 4)), P("b", (4,))
    t0, t1, t2, t3 = P("t0", (8, 4)), P("t1", (8, 4)), P("t2", (8, 4)), P("t3", ())
    m, r = P("t4", (8, 1)), P("t5", (8, 1))
    fusion = BoundSymbol(
        "fw_fusion_0", (t0, b), {}, (t2,), "f5", origin=("f1", "f2"), source=SRC_A, executor="triton", fusion=True,
        subsymbols=(BoundSymbol("prims.add", (t0, b), {}, t1, "f1", source=SRC_A, aten="aten.add.Tensor"),
                    BoundSymbol("prims.tanh", (t1,), {}, t2, "f2", source=SRC_A, aten="aten.tanh.default")))
    stats = BoundSymbol(
        "aten.var_mean.correction", (t2, [1]), {"correction": 0, "keepdim": True}, (m, r), "f3",
        source=SRC_A, executor="torch", note="not lowered: example",
        subsymbols=(BoundSymbol("prims.var", (t2, [1]), {"correction": 0.0, "keepdim": True}, m, "f6",
                                origin=("f3",), source=SRC_A,
                                subsymbols=(BoundSymbol("prims.mul", (t2, t2), {}, P("t9", (8, 4)), "f8"),)),
                    BoundSymbol("prims.mean", (t2, [1], True), {}, r, "f7", origin=("f3",), source=SRC_A)))
    symbols = (
        BoundSymbol("prims.mm", (x, w), {}, t0, "f0", origin=("f0",), source=SRC_A, executor="torch"),
        fusion,
        stats,
        BoundSymbol("del", (x, w, b), {}, None, "f9"),
        BoundSymbol("prims.sum", (t2,), {"dtype": torch.float32}, t3, "f4", source=SRC_B, seq_nr=7,
                    executor="torch"),
        BoundSymbol("prims.full", ([2], float("-inf")), {"device": torch.device("cpu")}, P("t6", (2,)), "f10",
                    source=SRC_B),
    )
    return Trace("forward", (x, w, b), symbols, (t3, m, r), chain="forward", graph=0, pass_name="fuse",
                 meta={"duration_ms": 0.8})


PRINTER_CASES = {
    "default": PrintOptions(),
    "no_shapes": PrintOptions(shapes=False),
    "no_source": PrintOptions(source=False),
    "depth0": PrintOptions(subsymbol_depth=0),
    "depth2_uids": PrintOptions(subsymbol_depth=2, uids=True),
    "bare": PrintOptions(shapes=False, source=False, subsymbol_depth=0, header=False),
}


@pytest.mark.parametrize("case", list(PRINTER_CASES))
def test_printer_golden(golden, case):
    text = print_trace(hand_built(), PRINTER_CASES[case])
    assert "/home/someone" not in text and "/tmp/elsewhere" not in text  # base names only
    golden(f"printer/{case}", text)


def test_bare_printed_trace_is_valid_python():
    compile(print_trace(hand_built(), PRINTER_CASES["bare"]), "<printed>", "exec")


@pytest.fixture(scope="module")
def tiny_passes(recorder_cls):
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    rec = recorder_cls()
    model = torch.compile(Tiny(), backend=ThundervisCompiler(executors=["torch"], observer=rec))
    model(torch.randn(2, 4)).backward()
    torch._dynamo.reset()
    assert rec.failures == []
    return rec


def _torch_release() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


@pytest.mark.parametrize("chain", ["forward", "backward"])
def test_pass_traces_golden(tiny_passes, golden, chain, request):
    name = f"passes/tiny_{chain}_torch{_torch_release()}"
    path = request.path.parent / "golden" / f"{name}.txt"
    if not path.exists() and os.environ.get("THUNDERVIS_UPDATE_GOLDEN") != "1":
        pytest.skip(f"no golden traces for torch {_torch_release()} (write them with THUNDERVIS_UPDATE_GOLDEN=1)")
    parts = []
    for pass_name, trace in tiny_passes.traces(chain).items():
        # durations and graph numbers vary from run to run; everything else is deterministic
        parts.append(print_trace(trace.replace(meta={}, graph=0), PrintOptions(uids=True)))
    text = "\n".join(parts)
    assert str(request.path.parent) not in text  # source comments name files by base name
    golden(name, text)


@pytest.mark.parametrize("case", list(PRINTER_CASES))
def test_memo_prints_the_same_text(case):
    # A memo shared by a sequence of traces that keep, rebuild (dataclasses.replace keeps args and
    # subsymbols) and rename symbols, as passes do: every print must equal the memo-free one.
    opts, memo = PRINTER_CASES[case], {}
    first = hand_built()
    rebuilt = first.replace(symbols=tuple(b.replace(executor="torch") for b in first.symbols))
    renamed = rebuilt.replace(symbols=(rebuilt.symbols[0].replace(sym="prims.other", uid="f99"),)
                              + rebuilt.symbols[1:])
    for trace in (first, first, rebuilt, renamed, first):
        assert print_trace(trace, opts, memo) == print_trace(trace, opts)
    assert memo


def test_pass_traces_print_the_same_with_a_memo(tiny_passes):
    for chain in ("forward", "backward"):
        memo = {}
        for trace in tiny_passes.traces(chain).values():
            assert print_trace(trace, memo=memo) == print_trace(trace)
