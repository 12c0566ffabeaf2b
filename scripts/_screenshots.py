"""What the docs screenshot scripts share (scripts/tui_screenshots.py, tui_asm_screenshot.py,
notebook_asm_screenshot.py): the TUI run headless on a recording and waited on until it settles,
the SVG-to-PNG step, and the arguments of the asm screenshots. Imported by those scripts (run as
``python scripts/NAME.py``, so this folder is on ``sys.path``); not part of the package."""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.asynccontextmanager
async def headless_tui(rec: str, size: tuple[int, int], pause: float, poll: float, screen_workers: bool = True):
    """Run the TUI headless on recording ``rec`` at ``size``; yield ``(app, pilot, idle)``, where
    ``await idle()`` waits ``pause`` seconds, then (every ``poll`` seconds) until the recording is
    loaded and no worker of the app (nor, with ``screen_workers``, of the current screen) runs."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.data import open_data
    app = ThundervisApp(open_data(rec), poll_s=0)
    async with app.run_test(size=size) as pilot:
        def busy() -> bool:
            return any(w.is_running for w in app.workers) or \
                (screen_workers and any(w.is_running for w in app.screen.workers))

        async def idle() -> None:
            await pilot.pause(pause)
            while not app.loaded or busy():
                await pilot.pause(poll)
        yield app, pilot, idle


def svg_to_png(svg: str, png: str) -> None:
    """Convert screenshot ``svg`` to ``png`` (scripts/svg_to_png.py, needs cairosvg), remove the
    SVG and say so; raises ``CalledProcessError`` when the conversion fails."""
    subprocess.run([sys.executable, os.path.join(HERE, "svg_to_png.py"), svg, png], check=True)
    os.remove(svg)
    print("wrote", png)


def kernel_shot_parser(doc: str) -> argparse.ArgumentParser:
    """Return the argument parser of an asm screenshot (described by ``doc``'s first line):
    ``recording kernel png [--target sm_90]``; the caller adds its own options."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("recording")
    p.add_argument("kernel")
    p.add_argument("png")
    p.add_argument("--target", default="sm_90")
    return p
