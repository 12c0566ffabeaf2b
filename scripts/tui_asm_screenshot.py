"""Take the docs screenshot of the TUI's asm view from a recording made with ``--target``:

    python scripts/tui_asm_screenshot.py REC KERNEL docs/tui-asm.png [--target sm_90] [--stage sass]

Opens the recording headless, opens the kernels screen, selects KERNEL, opens its asm view (``a``)
on the target and stage, moves to the last Triton line that loads data, saves an SVG and converts
it (scripts/svg_to_png.py, needs cairosvg)."""
from __future__ import annotations

import asyncio

from _screenshots import headless_tui, kernel_shot_parser, svg_to_png


async def shoot(rec: str, kernel: str, out_svg: str, target: str, stage: str, size=(160, 44)) -> None:
    """Save the screenshot of ``kernel``'s asm view."""
    async with headless_tui(rec, size, pause=0.5, poll=0.05) as (app, pilot, idle):
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
    p = kernel_shot_parser(__doc__)
    p.add_argument("--stage", default="sass")
    args = p.parse_args()
    svg = args.png[:-4] + ".svg"
    asyncio.run(shoot(args.recording, args.kernel, svg, args.target, args.stage))
    svg_to_png(svg, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
