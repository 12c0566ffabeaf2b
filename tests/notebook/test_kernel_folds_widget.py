"""The widget's kernel table shows a repeated layer's kernels as one folded row (the payload's
``fold``, present.kernel_folds), and a click on it opens the first instance."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytest.importorskip("anywidget")

from fold_fixtures import record_layers  # noqa: E402
from thundervis.notebook_ext.data import RecordingData  # noqa: E402
from thundervis.notebook_ext.widget import front_end  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

from test_js_visible import FAKE_DOM  # noqa: E402

HARNESS = r"""
const K = JSON.parse(process.env.TV_KERNELS);
const selected = [];
const view = {
  model: { get: (k) => ({ graph: 0 })[k] }, ask: () => Promise.resolve({ ok: true, data: { svg: null } }),
  data: {}, set: (x) => selected.push(x.selected_kernel), render: () => {}, diagrams: new Map(),
  fusions: { kernel: "", module: "", collapse: null, expand: [] }, graphOf: () => ({ kernels: K }),
};
const chain = { kind: "forward", passes: [{ index: 0, name: "acquire" }], diagram_pass: 0, diagram: null };
const tab = fusionsTab(view, chain);
const find = (n, cls) => n.className === cls ? n : n.children.map((c) => find(c, cls)).find(Boolean);
const rows = find(tab, "tv-kernels").children.find((c) => c.tag === "tbody").children;
const texts = rows.map((r) => r.children[0].textContent);
const folded = rows.find((r) => r.children[0].textContent.includes("×"));
(folded.listeners.click || []).forEach((f) => f({}));
const detail = find(tab, "tv-kernel-detail").textContent;
console.log(JSON.stringify({ texts, selected, detail }));
"""


@pytest.fixture(scope="module")
def six_layers(tmp_path_factory) -> str:
    return record_layers(tmp_path_factory.mktemp("widget_folds"), 6)


def test_the_payload_says_each_kernels_fold(six_layers):
    with open_recording(six_layers) as rec:
        data = RecordingData(rec)
        kernels = [k for g in data.graphs() for k in data.kernels_json(g)]
    folded = [k for k in kernels if k["fold"] and k["fold"]["folded"]]
    assert folded
    f = folded[0]["fold"]
    assert [k["id"] for k in folded if k["fold"]["opens"] == f["opens"]] == f["ids"]
    assert f["row_label"].startswith(f["label"] + " [") and f["summary"].startswith(f["layers"])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_click_on_the_folded_row_opens_the_first_instance(six_layers):
    with open_recording(six_layers) as rec:
        data = RecordingData(rec)
        kernels = [k for g in data.graphs() for k in data.kernels_json(g) if k["chain"] == "forward"]
    fold = next(k["fold"] for k in kernels if k["fold"] and k["fold"]["folded"])
    module = front_end().replace("export default { render };", "")
    proc = subprocess.run(["node", "--input-type=module"], input=FAKE_DOM + module + HARNESS, capture_output=True,
                          text=True, env={"TV_KERNELS": json.dumps(kernels), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["texts"]) == len(kernels) - fold["count"] + 1  # the later instances are in the fold's row
    assert fold["label"] in out["texts"] and not set(fold["names"][1:]) & set(out["texts"])
    assert out["selected"] == [fold["names"][0]]  # the first instance opens
    assert fold["summary"] in out["detail"] and fold["row_label"] in out["detail"]


def test_a_folded_rows_times_are_summed_over_its_instances(six_layers):
    """Timed instances (a profiled run's rows): the fold's median and share are the sums, which the
    widget's folded row shows beside each other (not the first instance's share)."""
    from dataclasses import replace

    from thundervis.present.kernel_folds import fold_json_by_kernel
    from thundervis.present.kernel_rows import kernel_table
    from thundervis.present.units import format_share

    with open_recording(six_layers) as rec:
        kernels = [k for g in rec.graphs() for k in g.kernels]
        rows = tuple(replace(r, calls=2, median_us=10.0 + r.id, share=0.01) for r in kernel_table(rec))
        by_kernel = fold_json_by_kernel(rec, kernels, rows)
    f = next(d for d in by_kernel.values() if d["folded"])
    assert f["median_us"] == sum(10.0 + i for i in f["ids"]) and f["calls"] == 2 * f["count"]
    assert f["share_text"] == format_share(0.01 * f["count"]) != format_share(0.01)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_folded_row_shows_the_folds_share(six_layers):
    with open_recording(six_layers) as rec:
        data = RecordingData(rec)
        kernels = [k for g in data.graphs() for k in data.kernels_json(g) if k["chain"] == "forward"]
    for k in kernels:  # each instance its own share, the fold its sum: the row must show the sum
        k["share_text"] = "one instance"
        if k["fold"] and k["fold"]["folded"]:
            k["fold"]["share_text"] = "all instances"
    module = front_end().replace("export default { render };", "")
    harness = HARNESS.replace("const texts = rows.map((r) => r.children[0].textContent);",
                              "const texts = rows.map((r) => r.children.map((c) => c.textContent).join('|'));")
    proc = subprocess.run(["node", "--input-type=module"], input=FAKE_DOM + module + harness, capture_output=True,
                          text=True, env={"TV_KERNELS": json.dumps(kernels), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    texts = json.loads(proc.stdout.strip().splitlines()[-1])["texts"]
    folded = [t for t in texts if "×" in t.split("|")[0]]
    assert folded and all("all instances" in t and "one instance" not in t for t in folded)
    assert any("one instance" in t for t in texts if t not in folded)


def test_a_folded_rows_roofline_is_the_sum_as_in_the_tui(six_layers):
    from thundervis.present.kernel_folds import folded_table, kernel_folds
    from thundervis.present.overview import read_overview, with_roofline
    from thundervis.present.units import format_roofline_us
    with open_recording(six_layers) as rec:
        data = RecordingData(rec)
        roofline, target = data.roofline()
        assert roofline, "the recording's kernels have a roofline model"
        kernels = [k for g in data.graphs() for k in data.kernels_json(g, roofline)]
        view = with_roofline(read_overview(rec), roofline, target)  # what the TUI's kernel table lays out
        tui_rows = {r.id: r for r in folded_table(view.kernels, kernel_folds(rec, [k for g in view.graphs for k in g.kernels]))}
    openers = [k for k in kernels if k["fold"] and k["fold"]["folded"] and k["fold"]["opens"] == k["id"]]
    assert openers
    for k in openers:
        summed = sum(roofline[i].roofline_us for i in k["fold"]["ids"])
        assert k["roofline_text"] == format_roofline_us(summed) == format_roofline_us(tui_rows[k["id"]].roofline_us)
        assert k["roofline_text"] != format_roofline_us(roofline[k["id"]].roofline_us)  # not the first instance's
