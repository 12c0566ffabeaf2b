"""Schema 4's compact pass storage: texts as bounded delta chains, symbol rows stored once per
distinct content, old schemas still read, and hostile delta chains refused with one sentence."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import zlib

import pytest

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
from thundervis.compiler.printer import print_trace
from thundervis.compiler.serialize import trace_to_json
from thundervis.recording import RecordingError, RecordingObserver, open_recording
from thundervis.recording.pass_deltas import (JSON_SEPARATOR, MAX_DELTA_CHAIN, TEXT_SEPARATOR, apply_delta,
                                              decode_ids, encode_delta, encode_ids)

from core_helpers import run_cli

N_PASSES = 3 * MAX_DELTA_CHAIN


def _proxy(name):
    return TensorProxy(name, (4, 8), "float32", "cpu", (8, 1))


def _chain_traces(n_symbols: int = 40) -> list[Trace]:
    """N_PASSES traces of one forward chain: each pass changes one symbol (its op and executor)."""
    names = [_proxy(f"t{i}") for i in range(n_symbols + 1)]
    syms = [BoundSymbol(sym="prims.neg", args=(names[i],), kwargs={}, outputs=names[i + 1], uid=f"f{i}",
                        origin=(), source=SourceInfo("/x/m.py", 10 + i % 5, "y = -x", "block", "forward"))
            for i in range(n_symbols)]
    traces = []
    for p in range(N_PASSES):
        k = (p * 7) % n_symbols
        syms[k] = syms[k].replace(sym="prims.abs" if p % 2 else "prims.neg", executor="torch", origin=(f"f{k}",))
        traces.append(Trace("forward", (names[0],), tuple(syms), (names[-1],), chain="forward", graph=0,
                            pass_name=f"p{p}", next_uid=n_symbols, next_name=n_symbols + 1))
    return traces


def _record(path: str, traces: list[Trace]) -> str:
    with RecordingObserver(path) as w:
        w.start_run(script="/x/m.py", module=None, argv=["/x/m.py"], cwd="/x")
        w.graph_started(0, {"n_inputs": 1, "n_nodes": 1, "reason": None})
        for i, t in enumerate(traces):
            w.pass_done(0, "forward", i, t.pass_name, t, 0.001, True)
        w.graph_finished(0, 0.01)
        w.finish_run("ok", 0)
    return path


@pytest.fixture
def chain_recording(tmp_path):
    traces = _chain_traces()
    return _record(str(tmp_path / "chain.tvrec"), traces), traces


def test_deltas_round_trip_any_text():
    cases = [("", ""), ("a\nb\nc", "a\nb\nc"), ("a\nb\nc", "c\nb\na"), ("x\n\n\nx", "\n\nx\n"),
             ('{"a":{"b":1},{"b":1}}', '{"b":1},{"a":{"b":2}}'), ("é\n\u202e\n", "\u202e\né\n\n"),
             ("\n".join(str(i % 7) for i in range(200)), "\n".join(str(i % 5) for i in range(230)))]
    for base, text in cases:
        for sep in (TEXT_SEPARATOR, JSON_SEPARATOR):
            assert apply_delta(base, encode_delta(base, text, sep), sep, "t", "p") == text
    ids = [5, 6, 7, 3, 100, 101, 1]
    assert decode_ids(zlib.compress(encode_ids(ids).encode()), "ids", "p") == ids


def test_passes_are_stored_as_bounded_deltas_and_read_exactly(chain_recording):
    path, traces = chain_recording
    with contextlib.closing(sqlite3.connect(path)) as c:
        bases = dict(c.execute("SELECT idx, delta_base FROM passes WHERE graph_id=0 AND chain='forward'"))
    assert sum(b is not None for b in bases.values()) >= N_PASSES // 2, bases

    def depth(i):
        return 0 if bases[i] is None else 1 + depth(bases[i])
    assert max(depth(i) for i in bases) <= MAX_DELTA_CHAIN
    assert [i for i in bases if bases[i] is None][1:], "a full snapshot at least every MAX_DELTA_CHAIN passes"
    with open_recording(path) as rec:
        for i, t in enumerate(traces):
            assert rec.pass_json(0, "forward", i) == trace_to_json(t)
            assert rec.pass_text(0, "forward", i) == print_trace(t)
            assert [(s.uid, s.sym, s.executor, s.origin, s.position) for s in rec.symbols(0, "forward", i)] == \
                   [(b.uid, b.sym, b.executor, tuple(b.origin), k) for k, b in enumerate(t.symbols)]
    with open_recording(path) as rec:  # any order: texts built earlier serve as bases, or not
        for i in [N_PASSES - 1, 3, N_PASSES - 2, 0, 9, 9, 10, 5]:
            assert (rec.pass_json(0, "forward", i), rec.pass_text(0, "forward", i)) == \
                   (trace_to_json(traces[i]), print_trace(traces[i]))
        # content-addressed rows: 40 symbols at first, then one new row per pass
        assert rec.store.rows("SELECT COUNT(*) FROM symbol_rows")[0][0] <= 40 + N_PASSES
        assert {s.pass_index for s in rec.symbols_with_uid(0, "f0")} == set(range(N_PASSES))
        assert {s.uid for s in rec.symbols_at_line(10)} == {f"f{i}" for i in range(0, 40, 5)}


def _tampered(src: str, folder, name: str, *sql) -> str:
    dst = str(folder / f"{name}.tvrec")
    shutil.copyfile(src, dst)
    with contextlib.closing(sqlite3.connect(dst)) as c, c:
        for statement in sql:
            c.execute(*statement) if isinstance(statement, tuple) else c.execute(statement)
    return dst


def test_hostile_delta_chains_and_symbol_lists_are_one_sentence(chain_recording, tmp_path, capsys):
    path, _ = chain_recording
    with contextlib.closing(sqlite3.connect(path)) as c:
        delta, base = c.execute("SELECT idx, delta_base FROM passes WHERE delta_base IS NOT NULL"
                                " ORDER BY idx DESC LIMIT 1").fetchone()
    where = f"graph_id=0 AND chain='forward' AND idx={delta}"
    with open_recording(path) as rec:  # a delta copying its whole base again and again: past the cap
        n = len(rec.pass_json(0, "forward", base).split(JSON_SEPARATOR))
        size = len(rec.pass_json(0, "forward", base))
    bomb = zlib.compress(json.dumps([[0, n]] * ((300 << 20) // size)).encode())
    cases = {
        "loops back": _tampered(path, tmp_path, "loop", f"UPDATE passes SET delta_base={delta} WHERE {where}"),
        "not an earlier pass": _tampered(path, tmp_path, "later", f"UPDATE passes SET delta_base={delta + 1} WHERE {where}"),
        "holds no trace": _tampered(path, tmp_path, "missing",
                                    f"DELETE FROM passes WHERE graph_id=0 AND chain='forward' AND idx={base}"),
        "more than": _tampered(path, tmp_path, "long", "UPDATE passes SET delta_base = idx - 1 WHERE idx > 0"),
        "delta operation": _tampered(path, tmp_path, "op", ("UPDATE passes SET trace_json=?1, printed=?1 WHERE " + where,
                                                            (zlib.compress(b'[[0, 99999999]]'),))),
        "expands past": _tampered(path, tmp_path, "bomb", ("UPDATE passes SET trace_json=?1, printed=?1 WHERE " + where,
                                                           (bomb,))),
        "symbol row ids": _tampered(path, tmp_path, "ids", ("UPDATE pass_symbols SET rows=?",
                                                            (zlib.compress(b"1,x,-3"),))),
        "are missing": _tampered(path, tmp_path, "gone", "DELETE FROM symbol_rows WHERE id > 3"),
    }
    for expected, bad in cases.items():
        with open_recording(bad) as rec, pytest.raises(RecordingError) as e:
            if expected in ("symbol row ids", "are missing"):
                rec.chain_symbols(0, "forward")
            elif expected in ("delta operation", "expands past"):  # the JSON's delta is damaged
                rec.pass_json(0, "forward", delta)
            else:
                rec.pass_text(0, "forward", N_PASSES - 1 if expected == "more than" else delta)
        msg = str(e.value)
        assert expected in msg and "\n" not in msg and msg.endswith("."), (expected, msg)
        command = ["lineage", bad, "--uid", "f0"] if expected in ("symbol row ids", "are missing") else \
            ["show", bad, "--graph", "0", "--chain", "forward", "--pass", str(delta), "--plain"]
        code, out, err = run_cli(capsys, *command)
        assert code == 2 and "Traceback" not in err and err.count("\n") == 1, (expected, code, out, err)


def _as_schema_3(path: str, dst: str) -> str:
    """Rewrite a schema-4 recording as schema 3 wrote it: full compressed texts and one ``symbols``
    row per symbol per pass, without the schema-4 tables and column."""
    shutil.copyfile(path, dst)
    with open_recording(path) as rec:
        texts, rows = {}, []
        for g in rec.graphs():
            for ch in g.chains:
                own = [p for p in ch.passes]
                for p in own:
                    held = rec.store.rows("SELECT symbols_from FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                                          (g.id, ch.kind, p.index))[0][0]
                    if held != p.index:
                        continue
                    texts[(g.id, ch.kind, p.index)] = (rec.pass_json(p.ref), rec.pass_text(p.ref))
                    for s in rec.symbols(p.ref):
                        src = s.source
                        rows.append((s.graph, s.chain, s.pass_index, s.position, s.uid, s.parent, s.sym,
                                     json.dumps(list(s.origin)), src and src.file, src and src.line,
                                     src and src.code, src and src.module, src and src.function, s.seq_nr,
                                     s.aten, s.executor, s.note))
    with contextlib.closing(sqlite3.connect(dst)) as c, c:
        for (g, ch, i), (j, t) in texts.items():
            c.execute("UPDATE passes SET trace_json=?, printed=? WHERE graph_id=? AND chain=? AND idx=?",
                      (zlib.compress(j.encode()), zlib.compress(t.encode()), g, ch, i))
        c.executemany("INSERT INTO symbols(graph_id, chain, pass_idx, position, uid, parent, sym, origin, file, line,"
                      " code, module, function, seq_nr, aten, executor, note) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      rows)
        c.execute("DROP TABLE symbol_rows")
        c.execute("DROP TABLE pass_symbols")
        c.execute("ALTER TABLE passes DROP COLUMN delta_base")
        c.execute("PRAGMA user_version = 3")
    return dst


def _everything(path: str) -> dict:
    out = {}
    with open_recording(path) as rec:
        for g in rec.graphs():
            for ch in g.chains:
                out[(g.id, ch.kind)] = [(s.pass_index, s.position, s.uid, s.sym, s.origin, s.source, s.executor)
                                        for s in rec.chain_symbols(g.id, ch.kind)]
                for p in ch.passes:
                    out[p.ref] = (rec.pass_text(p.ref), rec.pass_json(p.ref))
                sym = out[(g.id, ch.kind)][0][2] if out[(g.id, ch.kind)] else None
                if sym:
                    out[("lineage", g.id, ch.kind)] = rec.lineage_of_uid(g.id, sym).as_json()
        out["line"] = [(s.graph, s.chain, s.pass_index, s.uid) for s in rec.symbols_at_line(10)]
        out["schema"] = rec.schema_version
    return out


def test_schema_3_recordings_still_read(chain_recording, recorded, tmp_path):
    for k, src in enumerate((chain_recording[0], recorded[0])):
        old = _as_schema_3(src, str(tmp_path / f"old{k}.tvrec"))
        new, was = _everything(src), _everything(old)
        assert (new.pop("schema"), was.pop("schema")) == (4, 3)
        assert new == was


def test_packed_groups_expand_deltas_and_read_the_same(chain_recording, tmp_path):
    from thundervis.recording.group_store import open_group_store, pack_rank
    path, traces = chain_recording
    folder = tmp_path / "g"
    folder.mkdir()
    packed = str(folder / "rank-00000.tvrec")
    shutil.copyfile(path, packed)
    store = open_group_store(str(folder / "traces.tvstore"))
    try:
        assert pack_rank(packed, store)
    finally:
        store.close()
    with contextlib.closing(sqlite3.connect(packed)) as c:
        assert c.execute("SELECT COUNT(*) FROM passes WHERE delta_base IS NOT NULL").fetchone()[0] == 0
        assert c.execute("SELECT COUNT(*) FROM symbol_rows").fetchone()[0] == 0
    with open_recording(packed) as rec:
        assert rec.store.kind == "packed"
        for i, t in enumerate(traces):
            assert json.loads(rec.pass_json(0, "forward", i))["symbols"] == json.loads(trace_to_json(t))["symbols"]
            assert rec.pass_text(0, "forward", i).split("\n", 1)[1] == print_trace(t).split("\n", 1)[1]
        assert len(rec.symbols_with_uid(0, "f0")) == N_PASSES
    assert os.path.getsize(packed) < os.path.getsize(path)


def test_rank_comparison_sees_a_difference_inside_a_delta(chain_recording, tmp_path):
    from thundervis.recording.group_texts import trace_hashes
    path, traces = chain_recording
    last = traces[-1]
    changed = traces[:-1] + [last.replace(symbols=last.symbols[:-1] + (last.symbols[-1].replace(sym="prims.exp"),))]
    other = _record(str(tmp_path / "other.tvrec"), changed)
    with open_recording(path) as a, open_recording(other) as b:
        assert a.store.rows("SELECT delta_base FROM passes WHERE idx=?", (N_PASSES - 1,))[0][0] is not None
        ha, hb = trace_hashes(a), trace_hashes(b)
    assert [h[4] for h in ha[:-1]] == [h[4] for h in hb[:-1]] and "damaged" not in {h[4] for h in ha}
    assert ha[-1][4] != hb[-1][4]


@pytest.mark.parametrize("codegen_changes", [False, True])
def test_a_chains_final_pass_is_stored_whole(tmp_path, codegen_changes):
    """Views, ls and source open the final pass first: it never needs a delta chain."""
    traces = _chain_traces()[:5]
    final = traces[-1].replace(pass_name="codegen", meta={"source": "def f(): pass"}) if codegen_changes else traces[-1]
    path = str(tmp_path / "final.tvrec")
    with RecordingObserver(path) as w:
        w.start_run(script="/x/m.py", module=None, argv=["/x/m.py"], cwd="/x")
        for i, t in enumerate(traces):
            w.pass_done(0, "forward", i, t.pass_name, t, 0.001, True)
        w.pass_done(0, "forward", 5, "codegen", final, 0.001, codegen_changes)
        w.finish_run("ok", 0)
    with contextlib.closing(sqlite3.connect(path)) as c:
        bases = dict(c.execute("SELECT idx, delta_base FROM passes"))
    assert bases[5 if codegen_changes else 4] is None and any(b is not None for b in bases.values()), bases
    with open_recording(path) as rec:
        for i, t in enumerate(traces):
            assert rec.pass_json(0, "forward", i) == trace_to_json(t)
        assert rec.pass_trace(0, "forward", 5).symbols == final.symbols


def _noted_traces() -> list[Trace]:
    """Two passes whose symbols mix torch ops with and without notes, other executors, ``del`` and
    names inside and just outside the collectives' namespaces."""
    names = [_proxy(f"t{i}") for i in range(9)]
    spec = [("prims.neg", "torch", "not lowered: x"), ("prims.abs", "torch", None), ("prims.exp", "triton", "fused"),
            ("_c10d_functional.all_reduce.default", "torch", "communication op"), ("c10d", "torch", ""),
            ("_c10d_functionalx.all_reduce", "torch", None), ("_c10d_functional.wait_tensor.default", None, None),
            ("del", "torch", "freed")]
    syms = tuple(BoundSymbol(sym=s, args=(names[i],), kwargs={}, outputs=names[i + 1], uid=f"f{i}", executor=e,
                             note=n) for i, (s, e, n) in enumerate(spec))
    return [Trace("forward", (names[0],), syms[:k], (names[k],), chain="forward", graph=0, pass_name=f"p{k}",
                  next_uid=8, next_name=9) for k in (8, 6)]


def test_symbol_rules_select_in_sql_what_the_python_rule_selects(recorded, tmp_path):
    """``matching_symbols`` reads only the rows a rule selects; on either schema it returns exactly
    the symbols the rule's Python test keeps, in walk order."""
    from thundervis.compiler.collectives import COMMUNICATION_NAMESPACES
    from thundervis.recording import TORCH_NOTED
    from thundervis.recording.symbol_rows import top_level_in_namespaces
    rules = (TORCH_NOTED, top_level_in_namespaces(COMMUNICATION_NAMESPACES), top_level_in_namespaces({"prims"}))
    noted = _record(str(tmp_path / "noted.tvrec"), _noted_traces())
    selected = {}
    for k, src in enumerate((noted, recorded[0])):
        for path in (src, _as_schema_3(src, str(tmp_path / f"old{k}.tvrec"))):
            with open_recording(path) as rec:
                for g in rec.graphs():
                    for ch in g.chains:
                        for p in ch.passes:
                            for r, rule in enumerate(rules):
                                want = [s for s in rec.symbols(p.ref) if rule.keep(s)]
                                got = rec.matching_symbols(p.ref, rule)
                                assert got == want, (path, p.ref, r)
                                selected[k, r] = selected.get((k, r), 0) + len(got)
    with open_recording(noted) as rec:
        last = rec.graphs()[0].chains[0].passes[0].ref
        assert [s.sym for s in rec.matching_symbols(last, rules[0])] == [
            "prims.neg", "_c10d_functional.all_reduce.default"]
        assert [s.sym for s in rec.matching_symbols(last, rules[1])] == [
            "_c10d_functional.all_reduce.default", "_c10d_functional.wait_tensor.default"]
    assert selected[0, 0] and selected[1, 2]  # not vacuous: both files have rows each rule selects
