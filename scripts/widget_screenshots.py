"""Take the README screenshots of the notebook widget's tabs without JupyterLab:

    python scripts/widget_screenshots.py REC OUT.png --tab passes [--chain forward] [--pass fuse]
        [--compare claim] [--select UID]    # the diff of two passes, a symbol's details beside it
    python scripts/widget_screenshots.py REC OUT.png --tab source
    python scripts/widget_screenshots.py REC OUT.png --tab fusions [--chain forward] [--click-block N]
    python scripts/widget_screenshots.py REC OUT.png --tab numerics [--click .tv-num-row]
    python scripts/widget_screenshots.py REC OUT.png --tab memory    # the timeline is in the payload

Builds the widget in Python (``thundervis.show``), answers the requests the tab will make in
Python beforehand, and loads the shipped front end in headless Chromium (Playwright, Debian's
chromium) on a page whose stand-in model replays those answers; ``--click-block N`` clicks the N-th
module block box of the diagram (the front end then asks for it expanded) before the screenshot.
On the Passes tab, ``--select UID`` selects a symbol: its details and lineage are answered
beforehand for the pass shown.
On the Numerics tab (a ``run --check-numerics`` recording) the bisect of the first row's chain is
answered beforehand, so ``--click .tv-num-row`` shows that kernel's bisect.

The docs' shots: ``thundervis run --profile`` of examples/train_mlp.py (``--tab passes --pass fuse
--compare claim --select UID --width 1320 --height 660``, UID the fw_fusion_0 line's;
``--tab fusions --click .tv-kernel-row --width 1320 --height 620``), of examples/train_gpt.py
(``--tab source --height 625``; ``--tab memory --height 420``), its ``run --check-numerics``
(``--tab numerics --click .tv-num-row --width 1300 --height 1000``), and a 24-layer tiny Llama
(benchmarks/_compile_scale.llama(24), one training step; ``--tab fusions --height 620``).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}
body {{ font-family: sans-serif; margin: 8px; background: white; }}</style></head>
<body><div id="host"></div><script type="module">
{js}
const TRAITS = {traits};
window.__tv_traits = TRAITS;
const ANSWERS = {answers};
const handlers = {{}};
const keyOf = (r) => JSON.stringify([r.what, r.file || null, r.expand || [], r.module || null,
                                     r.collapse === undefined ? null : r.collapse,
                                     r.graph_filter === undefined ? null : r.graph_filter]);
const model = {{
  get: (k) => TRAITS[k],
  set: (k, v) => {{ TRAITS[k] = v; for (const f of handlers["change:" + k] || []) f(); }},
  save_changes: () => {{}},
  on: (ev, f) => {{ (handlers[ev] = handlers[ev] || []).push(f); }},
  off: (ev, f) => {{ handlers[ev] = (handlers[ev] || []).filter((x) => x !== f); }},
  send: (content) => {{
    const key = keyOf(content.request);
    window.__tv_asked = (window.__tv_asked || []).concat([key]);
    const reply = ANSWERS[key] || {{ ok: false, error: "no answer prepared for " + key }};
    setTimeout(() => {{ for (const f of handlers["msg:custom"] || []) f({{ id: content.id, ...reply }}); }}, 0);
  }},
}};
__tv_widget.render({{ model, el: document.getElementById("host") }});
</script></body></html>"""


def _key(what, file=None, expand=(), module=None, collapse=None, graph=None) -> str:
    return json.dumps([what, file, list(expand), module, collapse, graph], separators=(",", ":"))


def widget_page(w, tab: str, answers: dict) -> str:
    """Return an HTML page that renders widget ``w`` (its traits, ``tab`` open) with the shipped
    front end; the stand-in model answers requests from ``answers`` ({request key: reply}, see
    :func:`request_key`), records each request key in ``window.__tv_asked`` and exposes the traits
    as ``window.__tv_traits``."""
    from thundervis.notebook_ext.widget import _STATIC, front_end
    traits = {k: getattr(w, k) for k in ("data", "graph", "chain", "pass_index", "compare_index",
                                         "selected_uid", "selected_kernel")}
    traits.update(tab=tab, group={})
    js = front_end().replace("export default { render };", "window.__tv_widget = { render };")
    js = js.replace("</script", "<\\/script")
    return _PAGE.format(css=(_STATIC / "widget.css").read_text(encoding="utf-8"), js=js,
                        traits=json.dumps(traits).replace("</", "<\\/"),
                        answers=json.dumps(answers).replace("</", "<\\/"))


def request_key(what, file=None, expand=(), module=None, collapse=None, graph=None) -> str:
    """Return the key the page's stand-in model looks a request up by (``graph``: a Source
    request's ``graph_filter``)."""
    return _key(what, file, expand, module, collapse, graph)


def _index(which):
    """Return a pass given on the command line: an int when it is digits, else the name as given."""
    return int(which) if isinstance(which, str) and which.isdigit() else which


def main() -> int:
    """Write the screenshot; return the exit code."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording")
    p.add_argument("out")
    p.add_argument("--tab", choices=("passes", "source", "fusions", "numerics", "memory"), default="source")
    p.add_argument("--chain", default=None)
    p.add_argument("--pass", dest="pass_", default=None, metavar="PASS", help="the pass shown (index or name)")
    p.add_argument("--compare", default=None, metavar="PASS", help="show the diff from this pass (index or name)")
    p.add_argument("--select", default=None, metavar="UID", help="the symbol selected on the Passes tab")
    p.add_argument("--click-block", type=int, default=None)
    p.add_argument("--click", default=None, metavar="SELECTOR",
                   help="click the first element matching this CSS selector, then print the synced traits")
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=900)
    args = p.parse_args()

    import thundervis
    from thundervis.notebook_ext import DataError
    picks = {k: v for k, v in (("chain", args.chain), ("pass_", _index(args.pass_)), ("compare", _index(args.compare)))
             if v is not None}
    try:
        w = thundervis.show(args.recording, **picks)
    except DataError as e:
        print(str(e), file=sys.stderr)
        return 2
    answers, clicked = {}, None
    if args.select:
        w.selected_uid = args.select
        answers[_key("detail")] = w.request({"what": "detail", "graph": w.graph, "chain": w.chain,
                                             "pass": w.pass_index, "uid": args.select})
    if args.compare is not None:  # a diff of passes that are not neighbours is asked for, not sent
        answers[_key("diff")] = w.request({"what": "diff", "graph": w.graph, "chain": w.chain,
                                           "a": w.compare_index, "b": w.pass_index})
    if args.tab == "source":
        answers[_key("source")] = w.request({"what": "source"})
    elif args.tab == "numerics":
        rows = (w.data.get("numerics") or {}).get("rows") or []
        if not rows:
            print(f"{args.recording} was not checked (thundervis run --check-numerics)", file=sys.stderr)
            return 2
        answers[_key("bisect")] = w.request({"what": "bisect", "graph": rows[0]["graph"], "chain": rows[0]["chain"]})
    elif args.tab == "fusions":
        chain = next(c for g in w.data["graphs"] if g["id"] == w.graph for c in g["chains"] if c["kind"] == w.chain)
        d = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain, "pass": chain.get("diagram_pass")})
        answers[_key("diagram")] = d
        blocks = d.get("data", {}).get("blocks") or []
        if args.click_block is not None and args.click_block < len(blocks):
            path, clicked = blocks[args.click_block]["path"], blocks[args.click_block]["id"]
            answers[_key("diagram", expand=[path])] = w.request(
                {"what": "diagram", "graph": w.graph, "chain": w.chain, "pass": chain.get("diagram_pass"),
                 "expand": [path]})
    page_html = widget_page(w, args.tab, answers)
    folder = tempfile.mkdtemp(prefix="tv-widget-shot-")
    page_path = pathlib.Path(folder) / "widget.html"
    page_path.write_text(page_html, encoding="utf-8")

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "notebook"))
    from jupyter_helpers import chromium_page
    with chromium_page(args.width, args.height) as page:
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        page.wait_for_timeout(800)
        if clicked is not None:
            page.locator(f'g.node.tv-block[id="{clicked}"]').click()
            page.wait_for_timeout(800)
        if args.click:
            page.locator(args.click).first.click()
            page.wait_for_timeout(500)
            traits_now = page.evaluate("({tab: __tv_traits.tab, graph: __tv_traits.graph, chain: __tv_traits.chain, "
                                       "pass_index: __tv_traits.pass_index, selected_uid: __tv_traits.selected_uid, "
                                       "selected_kernel: __tv_traits.selected_kernel})")
            print(f"after the click: {traits_now}")
        page.screenshot(path=args.out, timeout=120_000)
        asked = page.evaluate("window.__tv_asked || []")
    print(f"screenshot written to {args.out}; requests: {asked}")
    if errors:
        print("page errors: " + "; ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("THUNDERVIS_NO_WIDGET_CHECK", "1")
    raise SystemExit(main())
