"""The work the remat pass and the memory ledger no longer repeat (compile time, issue 39): the
ledger's what-if reads the forward traces the forward chain acquired, the backward's readers come
from one walk, and a stack trace's user frame is found once. Each must give what the slow way gave."""
from __future__ import annotations

import os

import pytest
import torch

from thundervis.compiler import CompileObserver
from thundervis.compiler import remat as _remat
from thundervis.compiler.acquire import fx_to_trace
from thundervis.compiler.backend import ThundervisCompiler, reset_graph_ids
from thundervis.compiler.ledger import _readers, saved_storage
from thundervis.compiler.source import parse_stack_trace


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        h = self.a(x)
        h = torch.tanh(h) * torch.sigmoid(h) + h * 0.5
        return self.b(torch.relu(h) * h).square().mean()


class Keep(CompileObserver):
    def __init__(self):
        self.ledgers, self.finals, self.passes = {}, {}, {}

    def memory_ledger(self, graph, ledger):
        self.ledgers[graph] = ledger

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.finals[chain] = trace
        self.passes[(chain, name)] = trace


def _compile(remat: str, monkeypatch) -> tuple[Keep, list]:
    """Compile one step of Block under ``remat``; return the observer and each ledger call's
    (Partitioned, its what-if computed by acquiring both forward modules afresh)."""
    calls, ledger = [], _remat.ledger

    def spy(p, forward, backward, params):
        fresh = {policy: saved_storage(fx_to_trace(pair[0], chain="forward", graph=forward.graph),
                                       p.n_user_outputs, params)
                 for policy, pair in (("off", p.off), ("auto", p.auto)) if pair is not None}
        calls.append((p, fresh))
        return ledger(p, forward, backward, params)

    monkeypatch.setattr(_remat, "ledger", spy)
    reset_graph_ids()
    torch._dynamo.reset()
    obs = Keep()
    model, x = Block(), torch.randn(4, 16)
    torch.compile(model, backend=ThundervisCompiler(observer=obs, remat=remat, cache=False), dynamic=False)(x).backward()
    return obs, calls


@pytest.mark.parametrize("remat", ["off", "auto"])
def test_ledger_what_if_reads_the_acquired_forwards_and_equals_acquiring_again(remat, monkeypatch):
    obs, calls = _compile(remat, monkeypatch)
    assert len(calls) == 1 and obs.ledgers
    p, fresh = calls[0]
    # the forward chain handed over what it acquired: off always, auto when auto is what ran
    assert set(p.acquired) == ({"off", "auto"} if remat == "auto" else {"off"})
    totals = obs.ledgers[0]["totals"]
    assert (totals["what_if_off"], totals["what_if_auto"]) == (fresh["off"], fresh["auto"])
    assert totals["what_if_auto"] < totals["what_if_off"]  # the chain min-cut recomputes


def test_the_remat_pass_keeps_the_acquired_symbols_arguments_where_they_are_alike(monkeypatch):
    obs, _ = _compile("auto", monkeypatch)
    for chain in ("forward", "backward"):
        before = {b.uid: b for b in obs.passes[(chain, "acquire")].symbols}
        after = [b for b in obs.passes[(chain, "remat")].symbols if b.uid in before]
        assert after
        kept = [b for b in after if b.args is before[b.uid].args and b.outputs is before[b.uid].outputs]
        assert len(kept) >= len(after) // 2  # most ops read and make the same names under both policies
        assert all(b.args == before[b.uid].args for b in kept)


def _readers_one_by_one(trace, name):
    """The ledger's readers of one value, walked for that value alone (the old way)."""
    seen = []
    for b in trace.symbols:
        if b.sym == "del" or not any(p.name == name for p in b.flat_inputs()):
            continue
        inner = [s.aten or s.sym for s in b.subsymbols if any(p.name == name for p in s.flat_inputs())]
        label = f"{b.sym} ({', '.join(dict.fromkeys(inner))})" if b.fusion and inner else (b.aten or b.sym)
        if label not in seen:
            seen.append(label)
    return seen


def test_readers_in_one_walk_equal_one_walk_per_value(monkeypatch):
    obs, _ = _compile("auto", monkeypatch)
    backward = obs.finals["backward"]
    names = {p.name for p in backward.inputs}
    got = _readers(backward, names)
    assert any(b.fusion for b in backward.symbols)  # the labels of fusion readers are exercised
    assert got and all(got.get(n, []) == _readers_one_by_one(backward, n) for n in names)
    assert all(got[n] for n in got)
    row_readers = [r["readers"] for r in obs.ledgers[0]["saved"]]
    assert any(len(r) > 0 for r in row_readers)


def test_a_relative_frame_is_judged_in_the_folder_it_is_read_in(tmp_path, monkeypatch):
    """The user frame is memoised per stack trace, but whether a relative path is a library's
    depends on the working folder: the memo keeps them apart."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    trace = ('  File "train.py", line 3, in <module>\n    y = f(x)\n'
             '  File "/usr/lib/python3.11/functools.py", line 9, in f\n    return g(x)\n')
    monkeypatch.chdir(tmp_path)
    assert parse_stack_trace(trace).file == "train.py"
    monkeypatch.chdir(lib)  # now train.py is a file of an installed package: only library frames
    assert parse_stack_trace(trace).file == "/usr/lib/python3.11/functools.py"
    monkeypatch.chdir(tmp_path)
    info = parse_stack_trace(trace, "layers.0")
    assert (info.file, info.line, info.code, info.module) == ("train.py", 3, "y = f(x)", "layers.0")
    assert os.getcwd() == str(tmp_path)


def _p(name, shape=(4, 4)):
    from thundervis.compiler.ir import TensorProxy
    return TensorProxy(name, shape, "float32", "cpu")


def test_a_claimed_symbol_and_a_fusion_member_print_their_call_from_the_memo(monkeypatch):
    """A pass that sets executors (claim) or makes claimed symbols a fusion's members (fuse) keeps
    their arguments: the call text is made once per chain, and every print equals a memo-free one."""
    from thundervis.compiler import printer
    from thundervis.compiler.ir import BoundSymbol, Trace
    x, t0, t1 = _p("x"), _p("t0"), _p("t1")
    add = BoundSymbol("prims.add", (x, x), {"alpha": 2}, t0, "f0")
    tanh = BoundSymbol("prims.tanh", (t0,), {}, t1, "f1")
    first = Trace("forward", (x,), (add, tanh), (t1,), pass_name="decompose")
    claimed = first.replace(pass_name="claim", symbols=tuple(b.replace(executor="triton") for b in first.symbols))
    fused = first.replace(pass_name="fuse", symbols=(BoundSymbol(
        "fw_fusion_0", (x,), {}, (t1,), "f2", executor="triton", fusion=True, subsymbols=claimed.symbols),))
    # the same names in new objects, and a name changed: neither may print a stale call
    renamed = first.replace(symbols=(add.replace(args=(_p("x"), _p("x"))), tanh.replace(args=(_p("t9"),))))
    made = []
    real = printer.call_text
    monkeypatch.setattr(printer, "call_text", lambda b, callee=None: made.append(b.uid) or real(b, callee))
    memo = {}
    for trace in (first, claimed, fused, renamed):
        with monkeypatch.context() as m:
            m.setattr(printer, "call_text", real)
            plain = printer.print_trace(trace)
        assert printer.print_trace(trace, memo=memo) == plain
    assert "t9" in printer.print_trace(renamed, memo=memo)
    # made once for first (claim and fuse's members reuse them; the fusion is new), again for
    # renamed's new argument objects
    assert made == ["f0", "f1", "f2", "f0", "f1"]


def test_same_is_stricter_than_equality():
    from thundervis.compiler.remat import _kept, _same
    assert _same((_p("a"), [1, 2.5], {"k": None}), (_p("a"), [1, 2.5], {"k": None}))
    assert not _same((1,), (True,)) and (1,) == (True,)
    assert not _same(0.0, -0.0) and 0.0 == -0.0
    assert not _same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not _same((_p("a"),), (_p("b"),)) and not _same([1], (1,))
    old, new = (_p("a"), 3), (_p("a"), 3)
    assert _kept(new, old) is old and _kept((_p("c"), 3), old) is not old and _kept(new, None) is new
