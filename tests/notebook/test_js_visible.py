"""The widget's JS shows every recorded field through ``visible()`` (issue 41): the shipped module
runs under node against a small fake DOM, the asm panel, the Source tab and the Memory tab (issue
38) draw answers whose every
string holds the escape payload (raw, as a tampered recording could send it), and no text node,
attribute, class or title of what they build holds a raw control, C1, bidi character or lone
surrogate. The same run with ``visible()`` turned into the identity must find them (the check can
fail). Also: no JS file writes text past ``h()`` / ``setText()``."""
from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext.widget import front_end  # noqa: E402

STATIC = pathlib.Path(__file__).resolve().parents[2] / "notebook_ext" / "static"
PAYLOAD = ("\x1b]0;title\x07 \x1b]8;;https://evil.example\x07L\x1b]8;;\x07 \x1b[2J \x9b31m \x9d0;t\x9c"
           " \u202eabc \u2066x\u2069 \u200f")
LONE = "\ud800"

# A DOM with what the panels use; raw strings handed to append() become text nodes, as in a browser.
FAKE_DOM = r"""
class FakeNode {}
globalThis.Node = FakeNode;
class FakeText extends FakeNode {
  constructor(t) { super(); this.data = String(t); }
  get textContent() { return this.data; }
}
const camel = (s) => s.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
class FakeEl extends FakeNode {
  constructor(tag) {
    super(); this.tag = tag; this.childNodes = []; this.attrs = {}; this.dataset = {}; this.listeners = {};
    this.style = {}; this.className = ""; this.value = ""; this.checked = false; this.title = "";
    this.classList = { toggle() {}, add() {}, remove() {}, contains() { return false; } };
  }
  get children() { return this.childNodes.filter((c) => c instanceof FakeEl); }
  get firstChild() { return this.childNodes[0] || null; }
  get selectedOptions() { return []; }
  setAttribute(k, v) { this.attrs[k] = String(v); if (k.startsWith("data-")) this.dataset[camel(k.slice(5))] = String(v); }
  getAttribute(k) { return k in this.attrs ? this.attrs[k] : null; }
  appendChild(c) { this.childNodes.push(c); return c; }
  append(...cs) { for (const c of cs) this.childNodes.push(c instanceof FakeNode ? c : new FakeText(c)); }
  removeChild(c) { this.childNodes.splice(this.childNodes.indexOf(c), 1); return c; }
  set textContent(v) { this.childNodes = [new FakeText(v)]; }
  get textContent() { return this.childNodes.map((c) => c.textContent).join(""); }
  addEventListener(ev, f) { (this.listeners[ev] = this.listeners[ev] || []).push(f); }
  querySelectorAll() { return []; }
  querySelector() { return null; }
  scrollIntoView() {}
  contains() { return false; }
  after() {}
}
globalThis.document = {
  createElement: (t) => new FakeEl(t), createElementNS: (ns, t) => new FakeEl(t),
  createTextNode: (t) => new FakeText(t), createDocumentFragment: () => new FakeEl("#fragment"),
};
globalThis.requestAnimationFrame = () => 0;
"""

HARNESS = r"""
const P = JSON.parse(process.env.TV_PAYLOAD);
const BAD = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const found = [];
function walk(n, where) {
  if (n instanceof FakeText) { if (BAD.test(n.data)) found.push([where, n.data]); return; }
  for (const [k, v] of Object.entries(n.attrs)) if (BAD.test(v)) found.push([where + "@" + k, v]);
  for (const [k, v] of [["class", n.className], ["title", n.title]]) if (BAD.test(String(v))) found.push([where + "@" + k, String(v)]);
  n.childNodes.forEach((c, i) => walk(c, where + "/" + (c.tag || "#text") + i));
}
const click = (el) => (el.listeners.click || []).forEach((f) => f({ stopPropagation() {} }));
const tick = () => new Promise((r) => setTimeout(r, 0));

// the asm panel: an answer with the payload in every string, then a click on each row and line
const asmData = {
  kernel: P, graph: 0, chain: "forward", target: "sm_90" + P, targets: ["sm_90" + P, "sm_80" + P],
  stage: "sass", stages: ["ttir", "sass"], build: { summary_text: "32 regs" + P },
  source: ["@triton.jit" + P, "x = 1" + P], line_uids: { "1": "f3" + P, "2": "f4" + P },
  members: { ["f3" + P]: { sym: "prims.add" + P, where: "model.py:4" + P }, ["f4" + P]: { sym: P, where: P } },
  rows: [["MOV" + P, 1, "f3" + P, "prims.add" + P, "model.py:4" + P], ["EXIT" + P, 2, "f4" + P, P, P]],
  truncated: 0,
};
let answers = [{ ok: true, data: asmData }, { ok: false, error: "no build" + P }];
const asm = asmPanel(async () => answers.shift() || { ok: false, error: P }, 0, "forward", P, ["sm_90" + P]);
await tick();
for (const pane of asm.children.find((c) => c.className.includes("tv-asm-panes")).children) {
  for (const row of pane.children) click(row);
  walk(asm, "asm");
}
// a stage button: the next answer is an error, drawn in the info line
const bar = asm.children.find((c) => c.className === "tv-asm-bar");
click(bar.children.find((c) => c.tag === "button"));
await tick();
walk(asm, "asm-error");

// the Source tab
const view = {
  file: "/w/model.py" + P, files: ["/w/model.py" + P], graph_options: [{ graph: null, label: "every graph" + P }],
  summary: "model.py: 1 line made ops" + P,
  lines: [{ line: 1, text: "y = f(x)" + P, status: "compiled", share_text: "50%" + P, time_text: "5 us" + P,
            ops: [{ graph: 0, chain: "forward", uid: "f3" + P }],
            notes: [{ graph: 0, chain: "forward", graph_label: "g0" + P, text: "prims.add" + P, kernels: [{ name: P }] }] }],
};
const src = sourceTab({ get() { return 0; } }, async () => ({ ok: true, data: view }), { graphs: [] }, () => {},
                      { cache: new Map(), file: null, graph: null, line: null, onlyOps: false });
await tick();
walk(src, "source");
const errorView = sourceTab({ get() { return 0; } }, async () => ({ ok: false, error: "bad" + P }), { graphs: [] }, () => {},
                            { cache: new Map(), file: null, graph: null, line: null, onlyOps: false });
await tick();
walk(errorView, "source-error");

// the Memory tab: the peak line and a message with the payload, an SVG holding markup and a script
// (shown only as an <img> data: URL), then a recording made before the ledger
const svg = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script><text>\u00b5 " + P + "</text></svg>";
const mem = memoryTab({ recorded: true, message: "note" + P, peak_line: "memory peak: static 1.0 MB" + P, svg });
walk(mem, "memory");
const imgs = mem.children.filter((c) => c.tag === "img");
const src64 = imgs.length === 1 ? imgs[0].attrs.src : "";
const memImg = src64.startsWith("data:image/svg+xml;base64,") &&
  Buffer.from(src64.slice("data:image/svg+xml;base64,".length), "base64").equals(Buffer.from(svg, "utf8"));
const memNoMarkup = !mem.textContent.includes("<script>") && mem.children.every((c) => c.tag !== "svg" && c.tag !== "script");
const old = memoryTab({ recorded: false, message: "not recorded in this recording (made by an older version)" + P,
                        peak_line: "", svg: null });
walk(old, "memory-old");
const memOld = old.textContent.startsWith("not recorded in this recording (made by an older version)") &&
  old.children.every((c) => c.tag !== "img");
console.log(JSON.stringify({ found: found.slice(0, 20), count: found.length,
                             shown: asm.textContent.includes("\\x1b]0;title\\x07") && src.textContent.includes("\\u202eabc"),
                             memShown: mem.textContent.includes("memory peak: static 1.0 MB") && mem.textContent.includes("\\u202eabc"),
                             memImg, memNoMarkup, memOld }));
"""


def _run(js: str) -> dict:
    module = js.replace("export default { render };", "")
    proc = subprocess.run(["node", "--input-type=module"], input=FAKE_DOM + module + HARNESS, capture_output=True,
                          text=True, env={"TV_PAYLOAD": json.dumps(PAYLOAD + LONE), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_asm_panel_and_source_tab_show_recorded_strings_visibly():
    js = front_end()
    assert js.rstrip().endswith("export default { render };")
    result = _run(js)
    assert result["count"] == 0, result["found"]
    assert result["shown"]  # the payload is on the page, made visible
    # the Memory tab: its strings shown visibly, the plot only as an <img> of a base64 data: URL
    # that decodes to the SVG's UTF-8 bytes, never as markup; an old recording says so, no image
    assert result["memShown"] and result["memImg"] and result["memNoMarkup"] and result["memOld"], result


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_check_finds_raw_text_when_visible_is_the_identity():
    js = front_end()
    assert js.count("function visible(text) {") == 1
    raw = js.replace("function visible(text) {", "function visible(text) {\n  return String(text);")
    assert _run(raw)["count"] > 0


def test_no_js_file_sets_text_past_visible():
    """Text reaches the page only through h() (text, attributes and children through visible()) and
    setText(); no file assigns textContent/innerText/title or builds text nodes itself."""
    for path in sorted(STATIC.glob("*.js")):
        code = path.read_text(encoding="utf-8")
        lines = [(i + 1, line) for i, line in enumerate(code.splitlines())]
        for n, line in lines:
            if path.name == "common.js" and ("function setText" in line or "visible(" in line):
                continue
            assert not re.search(r"\.(textContent|innerText|outerText|innerHTML|nodeValue|title|placeholder)\s*=[^=]",
                                 line), f"{path.name}:{n}: {line.strip()}"
            assert "createTextNode(" not in line or "createTextNode(visible(" in line, f"{path.name}:{n}"
            # a raw string or template handed to append()/after() becomes a text node unescaped
            assert not re.search(r"\.(append|prepend|after|before|replaceWith|replaceChildren)\(\s*[`'\"]", line), \
                f"{path.name}:{n}: {line.strip()}"


def test_widget_payload_and_replies_hold_no_lone_surrogate(tmp_path):
    """A lone surrogate in a recorded string (here a build's uids, ops and files) would make the
    comm's UTF-8 encoding fail: the synced payload (a kernel's ops) and every reply (a build's uids,
    ops and files) are made encodable."""
    import contextlib
    import sqlite3
    from roofline_fixtures import roofline_recording
    from thundervis.notebook_ext import RecordingData
    from thundervis.notebook_ext.widget import RecordingWidget
    from thundervis.recording import open_recording
    path = roofline_recording(str(tmp_path / "r.tvrec"), build=True)
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        (summary,) = c.execute("SELECT summary FROM kernel_builds").fetchone()
        s = json.loads(summary)
        s["line_uids"] = {k: v + LONE for k, v in s["line_uids"].items()}
        s["members"] = {u + LONE: {**m, "sym": m["sym"] + LONE} for u, m in s["members"].items()}
        c.execute("UPDATE kernel_builds SET summary=?", (json.dumps(s),))
        (ops,) = c.execute("SELECT ops FROM kernels").fetchone()
        c.execute("UPDATE kernels SET ops=?", (json.dumps([op + LONE for op in json.loads(ops)]),))
    sent = []
    with open_recording(path) as rec:
        w = RecordingWidget(RecordingData(rec))
        json.dumps(w.data, ensure_ascii=False).encode("utf-8")
        w.send = sent.append
        w._on_request(w, {"id": 1, "request": {"what": "asm", "graph": 0, "chain": "forward",
                                               "kernel": "fw_fusion_0"}}, [])
    (reply,) = sent
    assert reply["ok"] and reply["id"] == 1, reply
    text = json.dumps(reply, ensure_ascii=False)
    text.encode("utf-8")
    assert "\\\\ud800" in text or "\\ud800" in text
