"""The lines every view shows: the printer's structured lines (kind, uid, depth, spans) match the
trace's symbols, also where long signatures and input comments wrap, and their text is exactly the
printed trace."""
from __future__ import annotations

import dataclasses

from _synthetic_recording import SCRIPT, chain_passes

from thundervis.compiler.ir import TensorProxy
from thundervis.compiler.printer import PrintOptions, print_lines, print_trace
from thundervis.present.trace_lines import text_lines


def _traces():
    return [t for _, t, _, _ in chain_passes(24, 6, "forward", "f", SCRIPT)]


def _check(trace, opts=PrintOptions()):
    lines = print_lines(trace, opts)
    assert "\n".join(ln.text for ln in lines) + "\n" == print_trace(trace, opts)
    stmts = [ln for ln in lines if ln.kind == "stmt"]
    top = [b for b in trace.symbols if b.sym != "del"]
    assert [ln.uid for ln in stmts] == [b.uid for b in top]
    for ln in stmts:
        b = next(b for b in top if b.uid == ln.uid)
        calls = [ln.text[a:e] for a, e, k in ln.spans if k == "call"]
        assert calls == [b.sym]
        types = [ln.text[a:e] for a, e, k in ln.spans if k == "type"]
        assert types == [p.short() for p in b.flat_outputs()]
        names = [ln.text[a:e] for a, e, k in ln.spans if k == "name"]
        assert names == [p.name for p in b.flat_outputs()]
    subs = [ln for ln in lines if ln.kind == "sub"]
    assert [ln.uid for ln in subs] == [s.uid for b in trace.symbols for s in b.subsymbols if s.sym != "del"]
    assert all(ln.depth == 1 for ln in subs) and all(ln.depth == 0 for ln in stmts)
    for ln in lines:  # spans are ordered and inside the line
        starts = [a for a, _, _ in ln.spans]
        assert starts == sorted(starts) and all(0 <= a < e <= len(ln.text) for a, e, _ in ln.spans)
    assert lines[-1].kind == "return"
    return lines


def test_every_pass_prints_each_statement_with_its_symbol():
    for t in _traces():
        _check(t)
        _check(t, PrintOptions(uids=True, notes=lambda b: "torch: not lowered: why" if b.executor else None))


def test_source_comments_name_file_code_and_module():
    lines = _check(_traces()[6])
    src = next(ln for ln in lines if ln.kind == "source")
    parts = {k: src.text[a:e] for a, e, k in src.spans}
    assert parts["file"].startswith("synthetic_model.py:") and parts["module"].startswith("[layers.")
    assert parts["code"] and src.uid is not None  # the uid of the statement it introduces


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
    meta = [ln for ln in lines if ln.kind == "meta"]
    assert sum(1 for ln in meta for a, e, k in ln.spans if k == "type") == len(t.inputs)


def test_plain_text_lines_have_no_symbols():
    lines = text_lines(["# a message", "x = 1"])
    assert [(ln.text, ln.kind, ln.uid, ln.spans) for ln in lines] == [("# a message", "text", None, ()),
                                                                      ("x = 1", "text", None, ())]
    assert lines[0].as_json() == ["# a message", "text", None, 0, []]
