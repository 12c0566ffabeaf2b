"""The widget's Fusions tab on a model with repeated blocks: one box per module block, a request
expands one (the front end sends it on a click or from the blocks list)."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext import show  # noqa: E402

LAYERED_SCRIPT = """\
import torch

class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))  # LINE_LAYER

class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()

torch.manual_seed(0)
model = torch.compile(Stack())
model(torch.randn(4, 8)).backward()
"""


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """A recording of a 3-layer stack (torch executor)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("layered")
    script = folder / "train_layers.py"
    script.write_text(LAYERED_SCRIPT)
    result = run_target(script=str(script), module=None, args=[], out=check_output(str(folder / "l.tvrec")),
                        executors=["torch"])
    assert result.exit_code == 0, result
    return result.path


def test_diagram_has_one_box_per_block_and_expands_on_request(layered):
    w = show(layered)
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward"})
    assert r["ok"], r
    d = r["data"]
    paths = [b["path"] for b in d["blocks"]]
    assert paths == ["layers.0", "layers.1", "layers.2"] and not any(b["expanded"] for b in d["blocks"])
    for b in d["blocks"]:  # each box is an SVG node the front end finds by id to expand it on click
        assert re.search(rf'<g id="{b["id"]}" class="node">', d["svg"])
    assert "cluster_block_" not in d["svg"]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "expand": ["layers.1"]})
    assert r["ok"] and r["data"]["expand"] == ["layers.1"]
    assert [b["path"] for b in r["data"]["blocks"] if b["expanded"]] == ["layers.1"]
    assert "cluster_block_1" in r["data"]["svg"]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "expand": ["nope"]})
    assert r["ok"] and r["data"]["svg"] is None and "no block 'nope'" in r["data"]["error"]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "expand": "layers.1"})
    assert r["ok"] and not any(b["expanded"] for b in r["data"]["blocks"])  # not a list: ignored


def test_front_end_expands_blocks_by_id_and_sends_the_expand_list():
    from thundervis.notebook_ext.widget import front_end
    js = front_end()
    assert "expand: state.expand" in js  # fusions_view.js
    assert 'svg.querySelector(`g.node[id="${b.id}"]`)' in js and "/^block_\\d+$/.test(b.id)" in js


# -- the Source tab ------------------------------------------------------------------------------

def test_source_request_answers_the_annotated_file(hostile):
    from notebook_helpers import HOSTILE_CODE, HOSTILE_FILE
    from thundervis.present.source_view import source_file
    from thundervis.recording import open_recording
    w = show(hostile)
    r = w.request({"what": "source"})  # default: the run's script
    assert r["ok"], r
    d = r["data"]
    assert d["file"].endswith(HOSTILE_FILE) and d["files"] == [d["file"]]
    with open_recording(hostile) as rec:
        assert d == source_file(rec, d["file"]).as_json()
    row = next(x for x in d["lines"] if HOSTILE_CODE in x["text"])
    assert {n["chain"] for n in row["notes"]} == {"forward", "backward"} and row["status"]
    assert row["kernels"] and row["ops"][0]["uid"]
    r = w.request({"what": "source", "file": HOSTILE_FILE, "graph_filter": 0})
    assert r["ok"] and r["data"]["graph"] == 0
    r = w.request({"what": "source", "file": "nope.py"})
    assert not r["ok"] and r["error"].startswith("no recorded file matches 'nope.py'")


def test_front_end_source_tab_writes_text_only():
    from thundervis.notebook_ext.widget import FRONT_END_PARTS, front_end
    assert "source_view.js" in FRONT_END_PARTS
    js = front_end()
    part = js[js.index("function sourceTab("):]
    part = part[:part.index("\n}\n")]
    assert "innerHTML" not in part and 'h("span", { class: "tv-src-code", text: row.text })' in part
    assert 'what: "source"' in part and 'tab: "passes"' in part  # a click opens the op in the Passes tab
    assert 'data-tab": "source"' in js and "sourceTab(model, ask, data, set, sourceState)" in js
    assert 'set({ graph: note.graph, chain: note.chain, tab: "fusions", selected_kernel: k.name })' in part
    assert 'h("span", { class: "tv-src-kernel tv-clickable", text: ` ${k.name}`' in part


def test_static_page_has_the_source_section(hostile):
    from notebook_helpers import HOSTILE_CODE, HtmlTags
    page = show(hostile)._repr_html_()
    assert "<h4>source · " in page and "tv-src-ops" in page
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == [] and HOSTILE_CODE in "".join(parser.texts) and HOSTILE_CODE not in page
