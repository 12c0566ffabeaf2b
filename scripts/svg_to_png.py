"""Convert a Textual SVG screenshot to PNG (for docs/): the SVG names the Fira Code web font, which
is swapped for a locally installed monospace font so the cells line up.

    python scripts/svg_to_png.py screenshot.svg out.png [--font "DejaVu Sans Mono"]
"""
from __future__ import annotations

import argparse
import re
import sys


def main() -> int:
    """Convert; return the exit code."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("svg")
    p.add_argument("png")
    p.add_argument("--font", default="DejaVu Sans Mono")
    p.add_argument("--scale", type=float, default=1.0)
    args = p.parse_args()
    try:
        import cairosvg
    except ImportError:  # a docs tool, not a dependency of thundervis
        print("svg_to_png: this needs cairosvg, which thundervis does not install: pip install cairosvg "
              "(it uses the system's libcairo)", file=sys.stderr)
        return 2
    try:
        text = open(args.svg, encoding="utf-8").read()
    except OSError as e:
        print(f"svg_to_png: cannot read {args.svg}: {e.strerror or e}", file=sys.stderr)
        return 2
    text = re.sub(r"@font-face\s*{[^}]*}", "", text)
    text = text.replace('"Fira Code"', f'"{args.font}"').replace("Fira Code,", f'"{args.font}",')
    cairosvg.svg2png(bytestring=text.encode("utf-8"), write_to=args.png, scale=args.scale)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
