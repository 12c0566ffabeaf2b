"""Take the README screenshots of the TUI (80x24 and 160x48) from a recording:

    python scripts/tui_screenshots.py REC docs/
    python scripts/tui_screenshots.py REC docs/ --numerics   # the numerics and bisect screens
    python scripts/tui_screenshots.py REC docs/ --source 49  # the Source screen on line 49

Opens the recording headless, goes to the forward chain's fusion pass with the diff against the
previous pass on, selects the first fusion line (details pane) and saves SVGs, then PNGs
(scripts/svg_to_png.py, needs cairosvg)."""
from __future__ import annotations

import argparse
import asyncio
import os
import re

from _screenshots import headless_tui, svg_to_png


async def shoot(rec: str, out_svg: str, size: tuple[int, int], diff: bool) -> None:
    """Save one screenshot of the app on ``rec`` at ``size``."""
    async with headless_tui(rec, size, pause=0.7, poll=0.05, screen_workers=False) as (app, pilot, idle):
        await idle()
        c = app.current_chain()
        fuse = next((p for p in c.passes if p.name == "fuse"), c.passes[-1])
        app.go_to_pass(fuse.index)
        await idle()
        if diff:
            await pilot.press("d")
            await idle()
        view = app.query_one("LinesView")
        fusion = re.compile(r"= \w*fusion_?\d+\(")
        target = next((i for i in range(view.line_count()) if view.uid_at(i) and fusion.search(view.texts[i])), 0)
        view.move_cursor(target)
        view.scroll_to(y=max(0, target - 2), animate=False, immediate=True)
        view.focus()
        await idle()
        app.save_screenshot(out_svg)


async def shoot_numerics(rec: str, out_svg: str, size: tuple[int, int], bisect: bool) -> None:
    """Save the numerics screen (N) of ``rec``, or with ``bisect`` the bisect screen its first
    (worst) kernel opens (enter), once the bisect worker has finished."""
    async with headless_tui(rec, size, pause=0.7, poll=0.1) as (app, pilot, idle):
        await idle()
        await pilot.press("N")
        await idle()
        if bisect:
            await pilot.press("enter")
            await idle()
        app.save_screenshot(out_svg)


async def shoot_source(rec: str, out_svg: str, size: tuple[int, int], line: int) -> None:
    """Save the Source screen (S) of ``rec`` with the cursor on the op line ``line`` (``n`` moves
    from op line to op line) and its details below."""
    async with headless_tui(rec, size, pause=0.7, poll=0.1) as (app, pilot, idle):
        await idle()
        await pilot.press("S")
        await idle()
        for _ in range(200):
            row = app.screen.selected() if hasattr(app.screen, "selected") else None
            if row is not None and row.line >= line:
                break
            await pilot.press("n")
            await pilot.pause(0.02)
        await idle()
        app.save_screenshot(out_svg)


def main() -> int:
    """Write docs/tui-80x24.{svg,png} and docs/tui-160x48.{svg,png}; with ``--numerics`` (a
    recording made with ``run --check-numerics --capture-inputs``) docs/tui-numerics-160x48.png
    and docs/tui-bisect-160x48.png instead."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0].rstrip(":"))
    ap.add_argument("rec", metavar="REC", help="a .tvrec recording")
    ap.add_argument("folder", metavar="DIR", help="where to write the SVGs and PNGs (e.g. docs/)")
    ap.add_argument("--numerics", action="store_true",
                    help="the numerics and bisect screens (a recording made with --check-numerics --capture-inputs)")
    ap.add_argument("--source", type=int, metavar="LINE",
                    help="the Source screen at 120x36 (docs/tui-source.png), the cursor on op line LINE")
    args = ap.parse_args()
    rec, folder = args.rec, args.folder
    if args.source is not None:
        svg = os.path.join(folder, "tui-source.svg")
        asyncio.run(shoot_source(rec, svg, (120, 36), args.source))
        svg_to_png(svg, svg[:-4] + ".png")
        return 0
    if args.numerics:
        for name, bisect in (("numerics", False), ("bisect", True)):
            svg = os.path.join(folder, f"tui-{name}-160x48.svg")
            asyncio.run(shoot_numerics(rec, svg, (160, 48), bisect))
            svg_to_png(svg, svg[:-4] + ".png")
        return 0
    for (w, h), diff in (((80, 24), False), ((160, 48), True)):
        svg = os.path.join(folder, f"tui-{w}x{h}.svg")
        asyncio.run(shoot(rec, svg, (w, h), diff))
        svg_to_png(svg, svg[:-4] + ".png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
