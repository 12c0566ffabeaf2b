"""Take the docs screenshot of the widget's asm panel from a recording made with ``--target``:

    python scripts/notebook_asm_screenshot.py REC KERNEL docs/notebook-asm.png [--target sm_90] [--line N]

Draws the panel in headless Chromium through tests/notebook/asm_page.py (the page the browser test
uses: the widget's JS and CSS, the kernel's replies computed here), clicks Triton line N (default:
the last line that loads data) and saves a PNG of the panel."""
from __future__ import annotations

import os
import sys

from _screenshots import HERE, kernel_shot_parser

sys.path[:0] = [os.path.join(HERE, "..", "tests", "notebook")]


def main() -> int:
    """Write the PNG; return the exit code."""
    from asm_page import asm_page
    from jupyter_helpers import chromium_page
    from thundervis.notebook_ext import RecordingData
    from thundervis.notebook_ext.widget import _answer
    from thundervis.recording import open_recording
    p = kernel_shot_parser(__doc__)
    p.add_argument("--line", type=int, default=0)
    args = p.parse_args()
    with open_recording(args.recording) as rec:
        k = rec.find_kernel(args.kernel)
        data = RecordingData(rec)
        targets = [b.target for b in rec.kernel_builds(k)]
        req = {"what": "asm", "graph": k.graph, "chain": k.chain, "kernel": k.name}
        replies = {f"{t}|{s}": _answer(data.handle, {**req, "target": t, "stage": s})
                   for t in targets for s in ("ttir", "ttgir", "llir", "ptx", "sass")}
    targets = [args.target] + [t for t in targets if t != args.target]
    html = asm_page(replies, k.name, targets, k.graph, k.chain)
    with chromium_page(1500, 760) as page:
        page.set_content(html)
        page.wait_for_function("window.__ready === true")
        page.locator(".tv-asm-row").first.wait_for(timeout=20_000)
        src = replies[f"{args.target}|sass"]["data"]["source"]
        line = args.line or max(i + 1 for i, t in enumerate(src) if "tl.load(" in t)
        page.locator(f'.tv-asm-line[data-line="{line}"]').click()
        page.locator(".tv-asm").screenshot(path=args.png)
    print("wrote", args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
