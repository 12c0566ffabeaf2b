"""A standalone page that draws the widget's asm panel (common.js + asm_view.js, the widget's CSS)
with ``ask`` answered from precomputed ``asm`` replies: the browser test and the docs screenshot
use it, without a Jupyter server."""
from __future__ import annotations

import json

from thundervis.notebook_ext.widget import _STATIC


def asm_page(replies: dict, kernel: str, targets: list, graph: int = 0, chain: str = "forward") -> str:
    """Return the HTML: ``replies`` maps ``"<target>|<stage>"`` (target empty for the default) to the
    ``_answer`` dict the kernel would send."""
    js = "\n".join((_STATIC / p).read_text(encoding="utf-8") for p in ("common.js", "asm_view.js"))
    css = (_STATIC / "widget.css").read_text(encoding="utf-8")
    # JSON inside a <script>: "</" would end the script element, so it is escaped.
    data = json.dumps(replies).replace("</", "<\\/")
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>{css}</style></head>
<body><div class="thundervis-widget" id="root" style="width: 1400px"></div>
<script type="module">
{js}
const replies = {data};
window.__asked = [];
const ask = (req) => {{
  window.__asked.push(req);
  const key = (req.target || "") + "|" + req.stage;
  return Promise.resolve(replies[key] || replies["|" + req.stage] || {{ ok: false, error: "no reply for " + key }});
}};
document.getElementById("root").appendChild(asmPanel(ask, {graph}, {json.dumps(chain)}, {json.dumps(kernel)}, {json.dumps(targets)}));
window.__ready = true;
</script></body></html>"""
