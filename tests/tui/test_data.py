"""The TUI's data layer: printed lines mapped to their symbols (long signatures and input comments
wrap over several lines), search."""
from __future__ import annotations

import dataclasses

from _synthetic_recording import SCRIPT, chain_passes

from thundervis.compiler.ir import TensorProxy
from thundervis.compiler.printer import print_trace
from thundervis.tui.data import map_lines


def _traces():
    return [t for _, t, _, _ in chain_passes(24, 6, "forward", "f", SCRIPT)]


def _check(trace):
    lines = map_lines(print_trace(trace).splitlines(), trace)
    stmts = [ln for ln in lines if ln.kind == "stmt"]
    top = [b for b in trace.symbols if b.sym != "del"]
    assert [ln.uid for ln in stmts] == [b.uid for b in top]
    for ln in stmts:
        b = next(b for b in top if b.uid == ln.uid)
        assert b.sym in ln.text
    subs = [ln for ln in lines if ln.kind == "sub"]
    assert [ln.uid for ln in subs] == [s.uid for b in trace.symbols for s in b.subsymbols if s.sym != "del"]
    assert lines[-1].kind == "return"
    return lines


def test_every_pass_maps_each_statement_to_its_symbol():
    for t in _traces():
        _check(t)


def test_wrapped_signature_and_input_comments():
    t = _traces()[6]  # after fusion: statements and subsymbols
    extra = tuple(TensorProxy(f"blocks_{i}_attn_qkv_weight", (96, 32), "float32", "cpu") for i in range(40))
    t = dataclasses.replace(t, inputs=t.inputs + extra)
    printed = print_trace(t).splitlines()
    assert sum(1 for ln in printed if ln.startswith("  # ") and "blocks_" in ln) > 1  # it did wrap
    lines = _check(t)
    kinds = [ln.kind for ln in lines]
    assert kinds[0] == "header" and kinds.count("def") > 1 and kinds.count("meta") > 1
    assert "source" in kinds
