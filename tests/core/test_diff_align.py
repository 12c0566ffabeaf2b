"""Alignment unit tests on hand-built traces: uid matches, origin links, fusions, text fallback."""
from __future__ import annotations

import time

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
from thundervis.diff import (ADDED, CHANGED, FUSED, MOVED, REMOVED, REPLACED, UNCHANGED, diff_traces,
                             intraline_spans, trace_lines)
from thundervis.diff.align import match_text


def P(name):
    return TensorProxy(name, (4,), "float32", "cpu")


def S(sym, args, out, uid, **kw):
    return BoundSymbol(sym, tuple(P(a) if isinstance(a, str) else a for a in args), {}, P(out), uid, **kw)


def T(symbols, outputs=("t9",), inputs=("x", "y"), pass_name="p"):
    return Trace("forward", tuple(P(n) for n in inputs), tuple(symbols), tuple(P(o) for o in outputs),
                 pass_name=pass_name)


def rows(d, status):
    return [r for r in d.lines if r.status == status]


def test_same_uid_unchanged_and_changed_with_intraline_spans():
    a = T([S("prims.add", ["x", "y"], "t0", "f0"), S("prims.mul", ["t0", "y"], "t9", "f1")])
    b = T([a.symbols[0], S("prims.mul", ["t0", "x"], "t9", "f1")])
    d = diff_traces(a, b)
    assert [r.status for r in d.lines] == [UNCHANGED, UNCHANGED, CHANGED, UNCHANGED]
    ch = rows(d, CHANGED)[0]
    assert ch.how == "uid" and ch.a.uid == ch.b.uid == "f1"
    sa, sb = intraline_spans(ch.a.text, ch.b.text)
    assert [ch.a.text[s:e] for s, e in sa] == ["y"] and [ch.b.text[s:e] for s, e in sb] == ["x"]


def test_removed_and_added_without_identity_or_text_match():
    a = T([S("prims.add", ["x", "y"], "t0", "f0"), S("prims.exp", ["t0"], "t9", "f1")])
    b = T([S("prims.add", ["x", "y"], "t0", "f0"), S("prims.neg", ["x"], "t5", "f7"),
           S("prims.exp", ["t0"], "t9", "f1")])
    d = diff_traces(a, b)
    assert [r.b.key for r in rows(d, ADDED)] == ["t5 = prims.neg(x)"]
    d2 = diff_traces(b, a)
    assert [r.a.key for r in rows(d2, REMOVED)] == ["t5 = prims.neg(x)"]


def test_origin_links_make_replaced_by_with_partner_lines():
    a = T([S("aten.gelu.default", ["x"], "t9", "f0")], inputs=("x",))
    new1 = S("prims.erf", ["x"], "t3", "f5", origin=("f0",))
    new2 = S("prims.mul", ["t3", "x"], "t9", "f6", origin=("f0",))
    d = diff_traces(a, T([new1, new2], inputs=("x",)))
    rep = rows(d, REPLACED)
    assert len(rep) == 1 and rep[0].a.uid == "f0" and rep[0].how == "origin"
    assert [p.uid for p in rep[0].partners] == ["f5", "f6"]
    added = rows(d, ADDED)
    assert [r.b.uid for r in added] == ["f5", "f6"] and all(r.partners[0].uid == "f0" for r in added)


def test_cse_style_merge_is_replaced_by_a_survivor():
    first = S("prims.mul", ["x", "y"], "t0", "f0")
    a = T([first, S("prims.mul", ["x", "y"], "t1", "f1"), S("prims.add", ["t0", "t1"], "t9", "f2")])
    b = T([first.replace(origin=("f0", "f1")), S("prims.add", ["t0", "t0"], "t9", "f2")])
    d = diff_traces(a, b)
    rep = rows(d, REPLACED)
    assert rep[0].a.uid == "f1" and rep[0].how == "merged" and rep[0].partners[0].uid == "f0"
    assert rows(d, CHANGED)[0].b.key == "t9 = prims.add(t0, t0)"


def test_members_of_a_fusion_are_fused_into_its_kernel():
    m0 = S("prims.add", ["x", "y"], "t0", "f0")
    m1 = S("prims.exp", ["t0"], "t9", "f1")
    a = T([m0, m1])
    fusion = BoundSymbol("fw_fusion_0", (P("x"), P("y")), {}, (P("t9"),), "f9", origin=("f0", "f1"),
                         subsymbols=(m0, m1), executor="triton", fusion=True)
    d = diff_traces(a, T([fusion]))
    before = [r for r in rows(d, FUSED) if r.a is not None]
    assert [(r.a.uid, r.kernel) for r in before] == [("f0", "fw_fusion_0"), ("f1", "fw_fusion_0")]
    assert d.kernels().keys() == {"fw_fusion_0"}
    assert rows(d, ADDED)[0].b.uid == "f9" and [p.uid for p in rows(d, ADDED)[0].partners] == ["f0", "f1"]
    # the diff of the fused trace with itself is all unchanged (members stay inside their kernel)
    assert not diff_traces(T([fusion]), T([fusion])).changed


def test_fused_into_through_origin_when_members_were_rebuilt():
    a = T([S("prims.add", ["x", "y"], "t9", "f0")])
    member = S("prims.add", ["x", "y"], "t9", "f3")  # a new uid: only the fusion's origin links it
    fusion = BoundSymbol("fw_fusion_1", (P("x"), P("y")), {}, (P("t9"),), "f4", origin=("f0",),
                         subsymbols=(member,), executor="nvfuser", fusion=True)
    d = diff_traces(a, T([fusion]))
    fused = [r for r in rows(d, FUSED) if r.a is not None]
    assert fused[0].kernel == "fw_fusion_1" and fused[0].how == "origin"


def test_text_fallback_matches_lines_whose_uids_differ():
    a = T([S("prims.add", ["x", "y"], "t0", "a0"), S("prims.mul", ["t0", "y"], "t1", "a1"),
           S("prims.exp", ["t1"], "t9", "a2")])
    b = T([S("prims.add", ["x", "y"], "t0", "b0"), S("prims.mul", ["t0", "x"], "t1", "b1"),
           S("prims.exp", ["t1"], "t9", "b2")])
    d = diff_traces(a, b)
    text_rows = [r for r in d.lines if r.how == "text"]
    assert [r.status for r in text_rows] == [UNCHANGED, CHANGED, UNCHANGED]
    d_off = diff_traces(a, b, text_fallback=False)
    assert not any(r.how == "text" for r in d_off.lines)
    assert len(rows(d_off, REMOVED)) == 3 and len(rows(d_off, ADDED)) == 3


def test_moved_symbols_keep_their_identity():
    s0, s1, s2 = (S("prims.neg", ["x"], f"t{i}", f"f{i}") for i in range(3))
    d = diff_traces(T([s0, s1, s2], outputs=("t0",)), T([s2, s0, s1], outputs=("t0",)))
    moved = rows(d, MOVED)
    assert {r.uid for r in moved} == {"f2"} and len(moved) == 2


def test_lines_include_subsymbols_to_the_requested_depth():
    sub = S("prims.exp", ["x"], "t9", "f5", origin=("f0",))
    parent = S("aten.exp.default", ["x"], "t9", "f0", subsymbols=(sub,), source=SourceInfo("m.py", 3, "y = x.exp()"))
    t = T([parent], inputs=("x",))
    assert [(l.uid, l.depth) for l in trace_lines(t)] == [("<inputs>", 0), ("f0", 0), ("f5", 1), ("<return>", 0)]
    assert [l.uid for l in trace_lines(t, depth=0)] == ["<inputs>", "f0", "<return>"]


def test_match_text_large_inputs_use_unique_anchors():
    a = [f"line {i}" for i in range(3000)]
    b = a[:1000] + ["new"] + a[1000:2000] + a[2100:]
    t0 = time.perf_counter()
    m = match_text(a, b)
    assert time.perf_counter() - t0 < 2.0
    assert sum(1 for _, _, eq in m if eq) == 2900
    assert all(x1 < x2 and y1 < y2 for (x1, y1, _), (x2, y2, _) in zip(m, m[1:]))


def test_alignment_is_linear_enough():
    def chain(n, prefix):
        syms = [S("prims.neg", ["x" if i == 0 else f"t{i - 1}"], f"t{i}", f"{prefix}{i}") for i in range(n)]
        return T(syms, outputs=(f"t{n - 1}",), inputs=("x",))
    small, big = chain(2000, "f"), chain(20000, "f")
    changed_big = big.replace(symbols=tuple(s.replace(sym="prims.abs") if i % 7 == 0 else s
                                            for i, s in enumerate(big.symbols)))
    changed_small = small.replace(symbols=tuple(s.replace(sym="prims.abs") if i % 7 == 0 else s
                                                for i, s in enumerate(small.symbols)))
    def best(a, b):
        return min(_timed(a, b) for _ in range(3))
    per_small = best(small, changed_small) / 2000
    per_big = best(big, changed_big) / 20000
    assert per_big < 4 * per_small  # quadratic would be ~10x


def _timed(a, b):
    t0 = time.process_time()
    diff_traces(a, b)
    return time.process_time() - t0
