"""Rendering DOT to SVG, PNG or PDF: the ``dot`` program when one is on PATH, else pygraphviz
(whose wheels bundle Graphviz, so a pip-only install renders), always in a child process with a
timeout. Graphviz's and Fontconfig's warnings (the ``Fontconfig warning: ... unknown element
"reset-dirs"`` of some systems) are written by C code straight to file descriptor 2; rendering in a
child keeps them on a pipe that is dropped, so they never reach the user's terminal or notebook cell.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from thundervis.safe_text import visible_line

FORMATS = ("svg", "png", "dot", "pdf")


class RenderError(Exception):
    """The diagram cannot be rendered (no Graphviz available, or Graphviz failed); one sentence."""


def render(dot_source: str, fmt: str = "svg", timeout_s: float = 300) -> bytes:
    """Return ``dot_source`` rendered to ``fmt`` (svg, png, pdf) by the ``dot`` binary when one is
    on PATH, else by pygraphviz; raise :class:`RenderError` when neither works."""
    if fmt == "dot":
        return dot_source.encode()
    if fmt not in FORMATS:
        raise RenderError(f"unknown diagram format {fmt!r} (formats: {', '.join(FORMATS)})")
    exe = shutil.which("dot")
    if exe:
        try:
            proc = subprocess.run([exe, f"-T{fmt}"], input=dot_source.encode(), capture_output=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RenderError(f"Graphviz took longer than {timeout_s:.0f} s; try --collapse or --module") from None
        if proc.returncode != 0:
            msg = proc.stderr.decode(errors="replace").strip().splitlines()
            raise RenderError(f"Graphviz failed: {msg[-1] if msg else 'exit code ' + str(proc.returncode)}")
        return proc.stdout
    import importlib.util
    if importlib.util.find_spec("pygraphviz") is None:
        raise RenderError("rendering needs Graphviz: install pygraphviz (pip install pygraphviz) or the "
                          "Graphviz 'dot' program, or write .dot")
    # pygraphviz renders in-process, in C: its warnings (Fontconfig's "unknown element reset-dirs",
    # Graphviz's own) go straight to file descriptor 2, into the user's terminal or notebook cell.
    # A child process keeps them on a pipe that is dropped, and gets the same timeout as `dot`.
    try:
        proc = subprocess.run([sys.executable, "-c", _PYGRAPHVIZ_CHILD, fmt], input=dot_source.encode(),
                              capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RenderError(f"Graphviz took longer than {timeout_s:.0f} s; try --collapse or --module") from None
    if proc.returncode != 0:
        errors = [x for x in proc.stderr.decode(errors="replace").splitlines() if x.startswith("thundervis-render: ")]
        why = (errors[-1].removeprefix("thundervis-render: ") if errors else
               f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}")
        raise RenderError(f"Graphviz failed: {visible_line(why)[:300]}")
    return proc.stdout


# Run by render() in a child process: DOT on stdin, the rendered bytes on stdout, a failure as one
# "thundervis-render: ..." line on stderr (everything else there is Graphviz's noise, dropped).
_PYGRAPHVIZ_CHILD = """
import sys
try:
    import pygraphviz
    data = pygraphviz.AGraph(string=sys.stdin.buffer.read().decode()).draw(format=sys.argv[1], prog="dot")
except Exception as e:
    sys.stderr.write("thundervis-render: " + " ".join(str(e).split()) + "\\n")
    sys.exit(1)
sys.stdout.buffer.write(data)
"""


def write_diagram(dot_source: str, path: str) -> str:
    """Write ``dot_source`` to ``path`` in the format its suffix names (.svg, .png, .pdf, .dot);
    return the format. Raise :class:`RenderError` for an unknown suffix."""
    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt not in FORMATS:
        raise RenderError(f"cannot tell the format from {path!r}: use a .svg, .png, .pdf or .dot file name")
    data = render(dot_source, fmt)
    with open(path, "wb") as f:
        f.write(data)
    return fmt
