"""Repeated layers fold in the recording: a layer's kernels are stored once, later instances refer to
the first one, every reader of a kernel's code and IR resolves them, and a tampered reference is
refused with one sentence."""
from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from core_helpers import run_cli, write_script
from thundervis.recording import RecordingError, open_recording

LAYERS = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Model(nn.Module):
    def __init__(self, n, d=16):
        super().__init__()
        self.layers = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


model = torch.compile(Model(LAYERS_N), backend="thundervis")
model(torch.randn(4, 16)).backward()
"""


def _record(folder, layers: int) -> str:
    from thundervis.runner import check_output, run_target
    script = write_script(folder, f"layers{layers}.py", LAYERS.replace("LAYERS_N", str(layers)), with_model=False)
    out = check_output(os.path.join(str(folder), f"layers{layers}.tvrec"))
    result = run_target(script=script, module=None, args=[], out=out)
    assert result.exit_code == 0, result
    return result.path


@pytest.fixture(scope="module")
def folded(tmp_path_factory) -> str:
    return _record(tmp_path_factory.mktemp("folds"), 4)


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
    """Eight layers: the folded recording holds each distinct kernel's texts once (sizes printed)."""
    path = _record(tmp_path, 8)
    folded = sum(len(c or b"") + len(t or b"") for c, t in _rows(path, "SELECT code, trace_json FROM kernels"))
    n_folds = len(_rows(path, "SELECT 1 FROM kernel_folds"))
    unfolded = _rows(path, "SELECT COUNT(*) FROM kernels")[0][0]
    with open_recording(path) as rec:
        whole = sum(len(rec.kernel_source(k).code or "") for k in rec.kernels())
    print(f"8 layers: {unfolded} kernels, {n_folds} folded; stored kernel texts {folded} bytes compressed; "
          f"code read back {whole} bytes")
    assert n_folds >= unfolded // 2


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
