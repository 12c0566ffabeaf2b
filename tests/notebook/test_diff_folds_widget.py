"""The widget's diff folds what a pass did to a run of equal layers as ``thundervis diff`` does
(the payload's ``layer`` rows: thundervis.diff.layer_folds, worded by thundervis.diff.render): a
click opens and closes the fold, and a symbol selected inside it (a jump from another tab) opens
it."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytest.importorskip("anywidget")

from fold_fixtures import write_layer_diff_recording  # noqa: E402
from thundervis.diff.layer_folds import diff_folds  # noqa: E402
from thundervis.diff.render import layer_fold_text, side_rows  # noqa: E402
from thundervis.notebook_ext.data import RecordingData  # noqa: E402
from thundervis.notebook_ext.diff_data import unfolded  # noqa: E402
from thundervis.notebook_ext.widget import front_end  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

from test_js_visible import FAKE_DOM  # noqa: E402

CLOSED = "▸ model.layers.1–5 × 5 more: the same changes as model.layers.0 above"

HARNESS = r"""
const D = JSON.parse((await import("fs")).readFileSync(process.env.TV_DIFF_FILE, "utf8"));
const opened = new Set();
let unselected = 0;
const table = diffTable(D, { selected: process.env.TV_SELECTED || null, opened, onUnselect: () => { unselected++; } });
const body = table.children.find((c) => c.tag === "tbody");
const texts = () => body.children.map((tr) => tr.textContent);
const click = (match) => {
  const tr = body.children.find((x) => x.textContent.includes(match));
  if (tr) (tr.children[0].listeners.click || []).forEach((f) => f({}));
};
const before = texts();
click(process.env.TV_CLICK);
const afterOne = texts();
const keys = [...opened];
click(process.env.TV_CLICK);
const afterTwo = texts();
console.log(JSON.stringify({ before, afterOne, afterTwo, keys, keysAfter: [...opened], unselected }));
"""


@pytest.fixture(scope="module")
def layer_diff(tmp_path_factory):
    path = write_layer_diff_recording(str(tmp_path_factory.mktemp("widget_diff_folds") / "layers.tvrec"), 6)
    with open_recording(path) as rec:
        data = RecordingData(rec)
        return data.diff_json(0, "forward", 0, 1), data.diff(0, "forward", 0, 1)


def test_the_payload_folds_the_layers_as_the_diff_command(layer_diff):
    payload, d = layer_diff
    (fold,) = diff_folds(d)
    (row,) = [r for r in payload["rows"] if r[0] == "layer"]
    assert row[3] == layer_fold_text(fold) == CLOSED and row[5] == fold.key
    assert row[6] == layer_fold_text(fold, True) and row[6].startswith("▾")
    hidden = unfolded(row[4])
    assert len(hidden) == fold.end - fold.start
    assert [r[2][2] for r in hidden if r[2]] == [ln.b.text for ln in d.lines[fold.start:fold.end] if ln.b]
    # every row is still there behind the folds: the unfolded payload is the unfolded diff
    assert [r[0] for r in unfolded(payload["rows"])] == [s.status for s in side_rows(d)]


def _run(tmp_path, diff, selected="", click="× 5 more"):
    path = tmp_path / "diff.json"
    path.write_text(json.dumps(diff))
    module = front_end().replace("export default { render };", "")
    proc = subprocess.run(["node", "--input-type=module"], input=FAKE_DOM + module + HARNESS, capture_output=True,
                          text=True, timeout=60, env={"TV_DIFF_FILE": str(path), "TV_SELECTED": selected, "TV_CLICK": click,
                                                      "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_click_opens_and_closes_the_layer_fold(layer_diff, tmp_path):
    payload, d = layer_diff
    (fold,) = diff_folds(d)
    out = _run(tmp_path, payload)
    assert CLOSED in out["before"] and not any("t18 =" in t for t in out["before"])
    opened = out["afterOne"]
    assert out["keys"] == [fold.key] and CLOSED.replace("▸", "▾") in opened
    assert any("t18 = aten.tanh.default(t17)" in t and "[triton]" in t for t in opened)
    assert len(opened) > len(out["before"])
    assert out["afterTwo"] == out["before"] and out["keysAfter"] == [] and out["unselected"] == 0


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_symbol_selected_inside_the_fold_opens_it(layer_diff, tmp_path):
    payload, d = layer_diff
    (fold,) = diff_folds(d)
    uid = d.lines[fold.end - 1].b.uid  # layer 5's last row
    out = _run(tmp_path, payload, uid)
    assert CLOSED.replace("▸", "▾") in out["before"] and any("t18 =" in t for t in out["before"])
    # the user's click closes it: the selection inside goes (drawn again without it, it stays closed)
    # (the harness does not redraw on it as the widget does: its second click hits the same row)
    assert out["keys"] == [] and out["unselected"] >= 1 and out["keysAfter"] == []


def test_the_static_page_folds_the_layers(layer_diff, tmp_path):
    """Without JavaScript (a notebook saved and viewed elsewhere) the diff shows the closed fold."""
    from thundervis.notebook_ext.static_html import diff_html
    payload, d = layer_diff
    page = diff_html({"kind": "passes", "title": "t", "diff": payload}, d)
    assert page.count(CLOSED) == 1 and "t18 =" not in page and "t3 =" in page


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_click_on_an_unchanged_run_shows_it(layer_diff, tmp_path):
    payload, d = layer_diff
    out = _run(tmp_path, payload, click="unchanged line")
    run = next(t for t in out["before"] if "unchanged line" in t)
    assert run == "… 1 unchanged line (click to show) …" and not any("def forward(" in t for t in out["before"])
    assert run not in out["afterOne"] and any("def forward(" in t for t in out["afterOne"])
    assert len(out["afterOne"]) == len(out["before"]) and out["afterTwo"] == out["afterOne"]
