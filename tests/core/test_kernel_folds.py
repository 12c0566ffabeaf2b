"""Repeated layers fold in the recording: a layer's kernels are stored once, later instances refer to
the first one, every reader of a kernel's code and IR resolves them, and a tampered reference is
refused with one sentence."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
import sqlite3

import pytest

from core_helpers import run_cli
from fold_fixtures import record_layers
from thundervis.present.kernel_folds import FOLD_AT, fold_labels, folded_table, kernel_folds
from thundervis.present.kernel_rows import kernel_table
from thundervis.recording import RecordingError, open_recording


@pytest.fixture(scope="module")
def folded(tmp_path_factory) -> str:
    return record_layers(tmp_path_factory.mktemp("folds"), 6)


def _rows(path: str, sql: str, params=()) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_later_layers_store_no_texts_and_read_as_the_first(folded):
    folds = _rows(folded, "SELECT kernel_id, fold_of FROM kernel_folds")
    assert folds, "four equal layers fold"
    for kid, first in folds:
        code, ir, graph, chain = _rows(folded, "SELECT code, trace_json, graph_id, chain FROM kernels WHERE id=?",
                                       (kid,))[0]
        assert code is None and ir is None  # no second copy
        assert _rows(folded, "SELECT graph_id, chain FROM kernels WHERE id=?", (first,))[0] == (graph, chain)
    with open_recording(folded) as rec:
        assert rec.kernel_folds() == dict(folds)
        kid, first = folds[-1]
        mine, theirs = rec.kernel_source(kid), rec.kernel_source(first)
        assert mine.code == theirs.code and mine.code and mine.trace_json == theirs.trace_json
        assert mine.name == rec.kernel(kid).name != theirs.name  # the instance keeps its own name


def test_rerun_and_repro_read_a_folded_instance(folded, tmp_path, capsys):
    with open_recording(folded) as rec:
        kid = sorted(rec.kernel_folds())[-1]
        name = rec.kernel(kid).name
    code, out, err = run_cli(capsys, "repro", folded, name, "-o", str(tmp_path / "r.py"))
    assert code == 0, err
    assert "def " in (tmp_path / "r.py").read_text()
    code, out, err = run_cli(capsys, "rerun", folded, name)
    assert code == 0, err
    assert name in out


def test_recording_gets_smaller_with_folds(tmp_path):
    """Eight layers: each distinct kernel's texts are stored once. Before folding every kernel stored
    its own code and IR (compressed as the writer does); the sizes are printed."""
    import zlib
    path = record_layers(tmp_path, 8)
    stored = sum(len(c or b"") + len(t or b"") for c, t in _rows(path, "SELECT code, trace_json FROM kernels"))
    n_folds = len(_rows(path, "SELECT 1 FROM kernel_folds"))
    n_kernels = _rows(path, "SELECT COUNT(*) FROM kernels")[0][0]
    with open_recording(path) as rec:
        unfolded = sum(len(zlib.compress(s.code.encode(), 6)) + len(zlib.compress(s.trace_json.encode(), 6))
                       for s in map(rec.kernel_source, rec.kernels()))
    print(f"8 layers: {n_kernels} kernels, {n_folds} folded; kernel code + IR stored: before {unfolded:,} bytes,"
          f" after {stored:,} bytes")
    assert n_folds >= n_kernels // 2 and stored * 2 < unfolded


@pytest.mark.parametrize("case, sql", [
    ("nothing", "UPDATE kernel_folds SET fold_of = 999999 WHERE kernel_id = (SELECT MAX(kernel_id) FROM kernel_folds)"),
    ("itself", "UPDATE kernel_folds SET fold_of = kernel_id WHERE kernel_id = (SELECT MAX(kernel_id) FROM kernel_folds)"),
    ("chain", "INSERT INTO kernel_folds SELECT fold_of, (SELECT MAX(kernel_id) FROM kernel_folds) FROM kernel_folds"
              " WHERE kernel_id = (SELECT MAX(kernel_id) FROM kernel_folds)"),
    ("another graph", "UPDATE kernels SET graph_id = graph_id + 7 WHERE id = (SELECT fold_of FROM kernel_folds"
                      " WHERE kernel_id = (SELECT MAX(kernel_id) FROM kernel_folds))"),
])
def test_a_tampered_reference_is_refused_in_one_sentence(folded, tmp_path, capsys, case, sql):
    path = str(tmp_path / f"{case.replace(' ', '_')}.tvrec")
    shutil.copy(folded, path)
    conn = sqlite3.connect(path)
    with conn:
        kid = conn.execute("SELECT MAX(kernel_id) FROM kernel_folds").fetchone()[0]
        name = conn.execute("SELECT name FROM kernels WHERE id=?", (kid,)).fetchone()[0]
        conn.execute(sql)
    conn.close()
    with open_recording(path) as rec:
        with pytest.raises(RecordingError) as e:
            rec.kernel_source(kid)
    text = str(e.value)
    assert "damaged" in text and text.count(". ") == 0 and "\n" not in text
    code, out, err = run_cli(capsys, "repro", path, name, "-o", str(tmp_path / "r.py"))
    assert code == 2 and "Traceback" not in err and "damaged" in err


def test_the_kernel_table_folds_repeated_layers_into_one_row(folded):
    """Six layers: the kernels equal but for names are one row labelled ``fw_fusion_2 × 4``."""
    with open_recording(folded) as rec:
        folds = kernel_folds(rec)
        rows = kernel_table(rec)
    big = [f for f in folds if f.count >= FOLD_AT]
    assert big and all(f.folded for f in big)
    f = big[0]
    assert f.label == f"{f.names[0]} × {f.count}" and f.opens == f.ids[0]
    assert f.layers.startswith("layers.") and "–" in f.layers
    table = folded_table(rows, folds)
    assert len(table) == len(rows) - sum(f.count - 1 for f in folds if f.folded)
    row = next(r for r in table if r.fold == f)
    assert row.id == f.opens and row.label.startswith(f.label + " [") and row.as_json()["fold"]["count"] == f.count
    assert fold_labels(folds)[(f.graph, f.chain, f.names[-1])] == f.label


def test_two_layers_stay_two_rows(folded, tmp_path):
    path = record_layers(tmp_path, 2)
    with open_recording(path) as rec:
        folds = kernel_folds(rec)
        rows = kernel_table(rec)
    assert all(f.count < FOLD_AT and not f.folded for f in folds)
    assert folded_table(rows, folds) == rows  # a 2-layer model shows both layers' kernels
    with open_recording(folded) as rec:  # a pair of equal kernels is shown as two rows too
        f = next(f for f in kernel_folds(rec) if f.count >= FOLD_AT)
        rows = kernel_table(rec)
    pair = replace(f, ids=f.ids[:2], names=f.names[:2])
    assert not pair.folded and folded_table(rows, (pair,)) == rows


def test_layers_of_different_widths_do_not_fold(folded, tmp_path):
    """Six blocks of one structure but each a different width (16 -> 24 -> ... -> 64): no two
    kernels are equal, so nothing folds, in the recording or in the views."""
    path = record_layers(tmp_path, 6, widths=(16, 24, 32, 40, 48, 56, 64))
    assert _rows(path, "SELECT COUNT(*) FROM kernel_folds") == [(0,)]
    with open_recording(path) as rec:
        assert all(f.count == 1 for f in kernel_folds(rec))
    assert _rows(folded, "SELECT COUNT(*) FROM kernel_folds")[0][0] > 0  # the same blocks at one width fold


def test_an_older_recording_folds_by_structure(folded, tmp_path):
    path = str(tmp_path / "old.tvrec")
    shutil.copy(folded, path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TABLE kernel_folds")
    conn.close()
    with open_recording(path) as rec:
        assert rec.kernel_folds() is None
        assert any(f.count >= FOLD_AT for f in kernel_folds(rec))


def test_ls_shows_one_line_per_fold(folded, capsys):
    with open_recording(folded) as rec:
        folds = kernel_folds(rec)
    f = next(f for f in folds if f.folded)
    code, out, err = run_cli(capsys, "ls", folded, "--json")
    assert code == 0, err
    doc = json.loads(out)
    fusions = {k["id"]: k for g in doc["graphs"] for k in g["fusions"]}
    assert all(fusions[i]["fold"]["label"] == f.label and fusions[i]["fold"]["opens"] == f.opens for i in f.ids)
    code, text, err = run_cli(capsys, "ls", folded)
    assert code == 0, err
    lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("fusion ")]
    assert sum(f.label in ln for ln in lines) == 1  # one line for the fold
    assert not any(f" {name} [" in ln for ln in lines for name in f.names[1:])  # its later instances are in it
    assert f.layers in next(ln for ln in lines if f.label in ln)
    assert len(lines) == len(fusions) - sum(x.count - 1 for x in folds if x.folded)


def test_the_abstract_answer_labels_kernels_as_the_table_folds_them(folded):
    from thundervis.present.abstract_fit import _kernel_folds
    with open_recording(folded) as rec:
        assert _kernel_folds(rec) == fold_labels(kernel_folds(rec))


def test_a_damaged_fold_row_leaves_the_views_working(folded, tmp_path, capsys):
    path = str(tmp_path / "typed.tvrec")
    shutil.copy(folded, path)
    conn = sqlite3.connect(path)
    with conn:
        kid = conn.execute("SELECT MAX(kernel_id) FROM kernel_folds").fetchone()[0]
        conn.execute("UPDATE kernel_folds SET fold_of = 'x' WHERE kernel_id = ?", (kid,))
    conn.close()
    code, out, err = run_cli(capsys, "ls", path)
    assert code == 0 and "fusion " in out  # nothing folds, every kernel is listed
    with open_recording(path) as rec:
        assert kernel_folds(rec) == ()
        with pytest.raises(RecordingError, match="corrupted"):
            rec.kernel_source(kid)


def test_layer_ranges():
    from types import SimpleNamespace
    from thundervis.present.kernel_folds import layer_of, layer_range
    assert layer_of("model.layers.7.mlp") == ("model.layers", 7) and layer_of("3.fc1") == ("", 3)
    assert layer_of("lm_head") is None and layer_of(None) is None and layer_of(7) is None  # untrusted values

    def k(*modules):
        return SimpleNamespace(source_lines=tuple({"module": m} for m in modules))
    assert layer_range([k("model.layers.0.mlp"), k("model.layers.1.mlp"), k("model.layers.2.mlp")]) == "model.layers.0–2"
    assert layer_range([k("", "model.layers.3.input_layernorm"), k("model.layers.3.post"),
                        k("model.layers.4.a"), k("model.layers.4.b")]) == "model.layers.3–4"  # two a layer
    assert layer_range([k("model.layers.0.a"), k("model.layers.0.b"), k("model.layers.1.a")]) == ""  # uneven
    assert layer_range([k("model.layers.0.a"), k("model.norm")]) == ""  # not all numbered
    assert layer_range([k("0.fc1"), k("1.fc1")]) == "0–1"


@pytest.mark.slow
def test_the_8_layer_tiny_llama_recording_gets_smaller():
    """benchmarks/fold_scale.py's two runs (folding off, on) of an 8-layer tiny Llama step."""
    import sys
    pytest.importorskip("transformers")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from fold_scale import compare
    r = compare(8)
    before, after = r["unfolded"], r["folded"]
    print(f"8-layer tiny Llama recording: before {before['recording_bytes']:,} bytes (kernel texts "
          f"{before['kernel_text_bytes']:,}), after {after['recording_bytes']:,} bytes (kernel texts "
          f"{after['kernel_text_bytes']:,}); modules generated {before['generated']} -> {after['generated']}")
    assert after["recording_bytes"] < before["recording_bytes"]
    assert after["kernel_text_bytes"] * 3 < before["kernel_text_bytes"] and after["generated"] * 3 < before["generated"]
    assert after["kernels"] == before["kernels"] and after["folds"] > 0 == before["folds"]


def test_a_packed_group_reads_folded_kernels_as_the_recording_does(folded, tmp_path):
    from test_group import _everything, _group
    from thundervis.recording import open_group
    from thundervis.recording.group_store import pack_group
    before = _everything(folded)
    group = _group(tmp_path, [folded, folded, folded])
    assert pack_group(group) == (3, 0)
    for rank in range(3):  # the first rank's file, and the two .tvrank overlays on it
        path = open_group(group).rank_path(rank)
        assert _everything(path) == before
        with open_recording(path) as rec:
            assert rec.kernel_folds() and kernel_folds(rec)
