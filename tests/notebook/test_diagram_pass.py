"""The fusion diagram draws the pass present chooses (issue 37): each chain's ``diagram_pass`` in the
payload (``present.default_view.diagram_pass``) is what the browser asks the kernel to draw, and the
kernel draws the pass it is asked for. The front end holds no "which pass" rule of its own."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext import show  # noqa: E402
from thundervis.notebook_ext.widget import front_end  # noqa: E402
from thundervis.present.default_view import diagram_pass  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

STATIC = pathlib.Path(__file__).resolve().parents[2] / "notebook_ext" / "static"

# Calls the Fusions tab's diagramFor with a chain whose diagram_pass is not its last pass, once
# filtered (it must ask, naming that pass) and once as opened (the payload's own diagram, no ask).
HARNESS = r"""
const asked = [];
const model = { get: (k) => ({ graph: 3 })[k] };
const ask = (req) => { asked.push(req); return Promise.resolve({ ok: true, data: { svg: null, pass: req.pass } }); };
const chain = { kind: "forward", passes: [{ index: 0 }, { index: 4 }, { index: 9 }], diagram_pass: 4,
                diagram: { svg: null, pass: 4, inline: true } };
const filtered = { model, ask, diagrams: new Map(), fusions: { module: "fc1", collapse: null, expand: [] } };
const opened = { model, ask, diagrams: new Map(), fusions: { module: "", collapse: null, expand: [] } };
const a = await diagramFor(filtered, chain);
const again = await diagramFor(filtered, chain);  // cached: asked once
const b = await diagramFor(opened, chain);
const none = { ...chain, diagram_pass: null, diagram: null };
await diagramFor({ model, ask, diagrams: new Map(), fusions: { module: "", collapse: true, expand: [] } }, none);
console.log(JSON.stringify({ asked, a, again, b }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_browser_asks_for_the_payloads_diagram_pass():
    module = front_end().replace("export default { render };", "")
    proc = subprocess.run(["node", "--input-type=module"], input=module + HARNESS, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    first, nothing = out["asked"]
    assert first == {"what": "diagram", "graph": 3, "chain": "forward", "pass": 4, "module": "fc1",
                     "collapse": None, "expand": []}
    assert out["a"]["pass"] == 4 and out["again"] == out["a"]
    assert out["b"] == {"svg": None, "pass": 4, "inline": True}  # the payload's diagram, not asked for
    assert nothing["pass"] is None  # a chain without passes: present said none, the kernel says why


def test_the_front_end_holds_no_diagram_rule():
    js = (STATIC / "fusions_view.js").read_text(encoding="utf-8")
    assert "c.diagram_pass" in js
    for rule in ("passes.length - 1", "passes[c.passes.length", ".at(-1)", "slice(-1)"):
        assert rule not in js, rule


def test_the_kernel_draws_the_pass_it_is_asked_for(hostile):
    w = show(hostile)
    with open_recording(hostile) as rec:
        g = next(g for g in rec.overview().graphs if g.id == w.graph)
        c = next(c for c in g.chains if len(c.passes) > 1 and any(k.chain == c.kind for k in g.kernels))
        wanted, other = diagram_pass(c), c.passes[0].index
    sent = next(x for x in next(x for x in w.data["graphs"] if x["id"] == w.graph)["chains"] if x["kind"] == c.kind)
    assert sent["diagram_pass"] == wanted and wanted != other
    r = w.request({"what": "diagram", "graph": w.graph, "chain": c.kind, "pass": wanted, "collapse": True})
    assert r["ok"] and r["data"]["pass"] == wanted
    r = w.request({"what": "diagram", "graph": w.graph, "chain": c.kind, "pass": other, "collapse": True})
    assert r["ok"] and r["data"]["pass"] == other
    r = w.request({"what": "diagram", "graph": w.graph, "chain": c.kind, "pass": 10_000})
    assert not r["ok"] and "10000" in r["error"] and "\n" not in r["error"]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": c.kind, "pass": True})  # not an index: the default
    assert r["ok"] and r["data"]["pass"] == wanted
