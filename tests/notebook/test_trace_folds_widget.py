"""The widget's Passes tab folds a pass's repeated layers (the payload's ``folds``,
present.trace_folds) behind one line: a click opens and closes it, and a symbol selected inside a
closed fold (a jump from the Source or Fusions tab) opens it."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytest.importorskip("anywidget")

from fold_fixtures import record_layers  # noqa: E402
from thundervis.notebook_ext.data import RecordingData  # noqa: E402
from thundervis.notebook_ext.widget import front_end  # noqa: E402
from thundervis.present.trace_folds import fold_line, pass_folds  # noqa: E402
from thundervis.present.pass_traces import PassTraces  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

from test_js_visible import FAKE_DOM  # noqa: E402

HARNESS = r"""
const C = JSON.parse((await import("fs")).readFileSync(process.env.TV_CHAIN_FILE, "utf8"));
const state = { selected_uid: process.env.TV_SELECTED };
const view = {
  model: { get: (k) => state[k] }, set: (x) => { Object.assign(state, x); }, render: () => {},
  infos: [], lineTable: [], fusions: { kernel: "" }, comm: null, data: {},
};
const index = Number(process.env.TV_PASS);
const texts = () => traceView(view, C, index).children.map((c) => c.textContent);
const before = texts();
const clickFold = () => {
  const line = traceView(view, C, index).children.find((c) => (c.attributes || {})["data-fold"] !== undefined
    || String(c.className).includes("tv-fold-line"));
  (line.listeners.click || []).forEach((f) => f({}));
};
clickFold();
const opened = texts();
clickFold();
const closed = texts();
console.log(JSON.stringify({ before, opened, closed, selected: state.selected_uid }));
"""


@pytest.fixture(scope="module")
def six_layers(tmp_path_factory) -> str:
    return record_layers(tmp_path_factory.mktemp("widget_trace_folds"), 6)


def _forward(path):
    with open_recording(path) as rec:
        data = RecordingData(rec)
        g = data.graphs()[0]
        c = g.chain("forward")
        chain = data.chain_json(g, c, with_diagram=False)
        chain["passes"] = [{"index": p.index, "name": p.name, "same_as": None} for p in c.passes]
        last = max(int(k) for k in chain["lines"])  # the last pass with its own trace (codegen changes none)
        folds = pass_folds(PassTraces(rec), g.id, "forward", last)
    return chain, last, folds


def test_the_payload_holds_each_passs_folds(six_layers):
    chain, last, folds = _forward(six_layers)
    sent = chain["folds"][str(last)]
    assert sent and [f["key"] for f in sent] == [f.key for f in folds]
    lines = chain["lines"][str(last)]
    for f, d in zip(folds, sent):
        assert d["line"] == fold_line(f).text and d["open_line"] == fold_line(f, True).text
        assert 0 < d["shown_start"] < d["start"] < d["end"] <= len(lines)
    assert set(chain["folds"]) == set(chain["lines"])  # one entry per pass that sends lines


def _run(tmp_path, chain, index, selected=""):
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"passes": chain["passes"], "lines": {str(index): chain["lines"][str(index)]},
                                "folds": {str(index): chain["folds"][str(index)]}}))
    module = front_end().replace("export default { render };", "")
    proc = subprocess.run(["node", "--input-type=module"], input=FAKE_DOM + module + HARNESS, capture_output=True,
                          text=True, timeout=60, env={"TV_CHAIN_FILE": str(path), "TV_PASS": str(index),
                                                      "TV_SELECTED": selected, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_click_opens_and_closes_the_fold(six_layers, tmp_path):
    chain, last, (fold,) = _forward(six_layers)
    lines = chain["lines"][str(last)]
    out = _run(tmp_path, chain, last)
    hidden = fold.end - fold.start
    assert len(out["before"]) == len(lines) - hidden + 1 and fold_line(fold).text in out["before"]
    assert len(out["opened"]) == len(lines) + 1 and fold_line(fold, True).text in out["opened"]
    assert out["closed"] == out["before"]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_symbol_selected_inside_a_closed_fold_opens_it(six_layers, tmp_path):
    chain, last, (fold,) = _forward(six_layers)
    lines = chain["lines"][str(last)]
    uid = next(ln[0] for ln in lines[fold.start:fold.end] if ln[4] == "stmt")
    out = _run(tmp_path, chain, last, uid)
    assert len(out["before"]) == len(lines) + 1 and fold_line(fold, True).text in out["before"]
    assert out["selected"] == ""  # closing the fold that holds the selection deselects it
    assert len(out["opened"]) == len(lines) - (fold.end - fold.start) + 1
