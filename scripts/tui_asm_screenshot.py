"""Take the docs screenshot of the TUI's asm view from a recording made with ``--target``:

    python scripts/tui_asm_screenshot.py REC KERNEL docs/tui-asm.png [--target sm_90] [--stage sass]

Opens the recording headless, opens the kernels screen, selects KERNEL, opens its asm view (``a``)
on the target and stage, moves to the last Triton line that loads data, saves an SVG and converts
it (scripts/svg_to_png.py, needs cairosvg)."""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys


async def shoot(rec: str, kernel: str, out_svg: str, target: str, stage: str, size=(160, 44)) -> None:
    """Save the screenshot of ``kernel``'s asm view."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.data import open_data
    app = ThundervisApp(open_data(rec), poll_s=0)
    async with app.run_test(size=size) as pilot:
        async def idle():
            await pilot.pause(0.5)
            while not app.loaded or any(w.is_running for w in app.workers) or \
                    any(w.is_running for w in app.screen.workers):
                await pilot.pause(0.05)
        await idle()
        await pilot.press("k")
        await idle()
        screen = app.screen
        row = next(i for i, k in enumerate(screen.kernels) if k.name == kernel)
        screen.query_one("DataTable").move_cursor(row=row)
        await idle()
        await pilot.press("a")
        await idle()
        asm = app.screen
        asm.target, asm.stage = target, stage
        asm.query_one("Tabs").active = stage
        asm.load()
        await idle()
        mapped = {r.triton_line for r in asm.listing.rows if r.triton_line and r.uid}
        loads = [i + 1 for i, t in enumerate(asm.listing.triton_source) if "tl.load(" in t and i + 1 in mapped]
        if loads:
            asm.query_one("#asrc").move_cursor(loads[-1] - 1)
        await idle()
        app.save_screenshot(out_svg)


def main() -> int:
    """Write the PNG; return the exit code."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording")
    p.add_argument("kernel")
    p.add_argument("png")
    p.add_argument("--target", default="sm_90")
    p.add_argument("--stage", default="sass")
    args = p.parse_args()
    svg = args.png[:-4] + ".svg"
    asyncio.run(shoot(args.recording, args.kernel, svg, args.target, args.stage))
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "svg_to_png.py"), svg, args.png], check=True)
    os.remove(svg)
    print("wrote", args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
