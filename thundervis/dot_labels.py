"""What a fusion diagram's parts look like: executor colours and the heat scale, the labels and
tooltips of ops, fusions and folded module blocks, the note of the collectives run between compiled
graphs, and the legend. :mod:`thundervis.dot` lays the parts out.

Recorded text reaches DOT through two functions only: :func:`dot_text` (quoted strings) and
:func:`dot_html` (HTML-like labels); nothing from a recording is executed.
"""
from __future__ import annotations

import html
from typing import Iterable, Optional

from thundervis.compiler.ir import BoundSymbol, TensorProxy, short_dtype
from thundervis.present.units import format_us
from thundervis.safe_text import visible_line

# Border and fill per executor (fills are light so labels stay readable).
PALETTE = {
    "triton": ("#6a3d9a", "#efe6f8"),
    "nvfuser": ("#2e8b3a", "#e3f4df"),
    "inductor": ("#e07b00", "#fff0dc"),
    "torch": ("#7a7a7a", "#f4f4f4"),
}
_OTHER = ("#1f6fb4", "#e2eef9")
# Collectives and their waits (compiler.collectives): drawn apart, fusion never crosses them.
COMMUNICATION = ("#b03a2e", "#fdecea")
_HEAT = ((255, 247, 236), (254, 196, 79), (215, 48, 31))  # pale -> amber -> red


def executor_colors(executor: Optional[str]) -> tuple[str, str]:
    """Return (border, fill) colours for an executor name."""
    return PALETTE.get(executor or "", _OTHER)


def heat_color(fraction: float) -> str:
    """Return the heat colour for ``fraction`` in [0, 1] (0: pale, 1: red) as ``#rrggbb``."""
    f = min(max(fraction, 0.0), 1.0)
    lo, mid, hi = _HEAT
    a, b, t = (lo, mid, f * 2) if f < 0.5 else (mid, hi, f * 2 - 1)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def type_label(p: TensorProxy) -> str:
    return f"{short_dtype(p.dtype)}[{', '.join(str(s) for s in p.shape)}]"


def shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def op_name(b: BoundSymbol) -> str:
    s = b.sym
    for pre in ("prims.", "aten.", "torch.nn.functional.", "torch."):
        if s.startswith(pre):
            s = s[len(pre):]
            break
    return s.removesuffix(".default")


def dot_text(text: object) -> str:
    """Return ``text`` as the value of a quoted DOT string attribute (a label, a tooltip, a graph
    name): control and bidi characters made visible, ``\\`` and ``"`` escaped (a pass name ending
    in a backslash cannot end the string early; ``\\N``, ``\\l`` are not DOT escapes), never
    read as an HTML-like label. The one quoting function for recorded strings in plain DOT text."""
    from graphviz import nohtml
    return nohtml(visible_line(text).replace("\\", "\\\\").replace('"', '\\"'))


def dot_html(text: object) -> str:
    """Return ``text`` for an HTML-like DOT label: control and bidi characters made visible, then
    HTML-escaped (Graphviz reads ``&``, ``<``, ``>`` and quotes in those labels)."""
    return html.escape(visible_line(text))


def tooltip(text: str) -> str:
    return dot_text(text)


def node_label(b: BoundSymbol, time_us: Optional[float], max_label: int) -> str:
    rows = [f"<B>{dot_html(op_name(b))}</B>"]
    outs = b.flat_outputs()
    if outs:
        rows.append(f'<FONT POINT-SIZE="8">{dot_html(shorten(" ".join(o.name for o in outs), max_label))}</FONT>')
    if b.source is not None and b.source.line:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{dot_html(b.source.label())}</FONT>')
    if time_us is not None:
        rows.append(f'<FONT POINT-SIZE="8"><B>{dot_html(format_us(time_us))}</B></FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def fusion_title(b: BoundSymbol, time_us: Optional[float]) -> str:
    n = len(b.subsymbols)
    parts = [f"<B>{dot_html(b.sym)}</B>", dot_html(b.executor or "?"), f"{n} op{'s' if n != 1 else ''}"]
    if time_us is not None:
        parts.append(f"<B>{dot_html(format_us(time_us))}</B>")
    return "<" + " · ".join(parts) + ">"


def tooltip_text(b: BoundSymbol) -> str:
    s = b.source
    where = f"{s.label()}  {s.code}" if s is not None and s.line else ""
    mod = f"  [{s.module}]" if s is not None and s.module else ""
    return shorten(f"{b.sym}  {where}{mod}".strip(), 300)


def block_node(blk, time_us: Optional[float], heat: Optional[str], t_max: float, max_label: int,
                n_out: int = 0, shared: Optional[list] = None) -> dict:
    """Return the node attributes of a folded block: its path, what it holds, how many of the
    trace's outputs it returns, the values it reads that many blocks share (``shared``: proxies),
    its source lines grouped per file, its time; its SVG id is the block's node id (the widget
    expands on click)."""
    from thundervis.present.kernel_rows import group_sources
    each = max(1, blk.instances)  # a fold of equal layers: what one of them holds
    n_k, ops = len(blk.kernels) // each, [b for b in blk.ops if b.sym != "del"]
    n_torch = sum(1 for b in ops if (b.executor or "torch") == "torch") // each
    held = [f"{n_k} kernel{'s' if n_k != 1 else ''}"] if n_k else []
    if ops:
        n_ops = len(ops) // each
        held.append(f"{n_ops} op{'s' if n_ops != 1 else ''}" + (f" ({n_torch} on torch)" if n_torch else ""))
    if each > 1:
        held = [f"each: {' · '.join(held) or 'no ops'}"]
    rows = [f'<B>{dot_html(blk.fold or blk.path)}</B> <FONT POINT-SIZE="8">▸</FONT>',
            f'<FONT POINT-SIZE="9">{dot_html(" · ".join(held) or "no ops")}</FONT>']
    if shared:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">reads {len(shared)} shared value'
                    f'{"s" if len(shared) != 1 else ""} ({dot_html(shorten(", ".join(type_label(p) for p in shared), max_label))})</FONT>')
    if n_out:
        rows.append(f'<FONT POINT-SIZE="8">→ {n_out} trace output{"s" if n_out != 1 else ""}</FONT>')
    where = group_sources([{"file": f, "line": n} for f, n in blk.sources()], limit=12)
    if where:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{dot_html(where)}</FONT>')
    if time_us is not None:
        rows.append(f'<FONT POINT-SIZE="8"><B>{dot_html(format_us(time_us))}</B></FONT>')
    border, _ = executor_colors((blk.executors() or [None])[0])
    hot = heat is not None and t_max > 0 and time_us / t_max > 0.75
    return {"label": "<" + "<BR/>".join(rows) + ">", "shape": "box", "style": "rounded,filled",
            "color": border, "fillcolor": heat or "#eef2f8", "penwidth": "2.5", "margin": "0.15,0.08",
            "fontcolor": "white" if hot else "black", "id": blk.node_id,
            "tooltip": tooltip(shorten(f"{blk.fold or blk.path}: {' · '.join(held)}; expand it to see its ops"
                                       + (f" (opens {blk.path})" if each > 1 else ""), 300))}


def between_note(g, side: str, lines: list, max_lines: int = 12) -> str:
    """Draw the note of the collectives run eagerly right ``side`` (before, after) the chain's first
    call; return its node id."""
    shown = [dot_html(shorten(line, 100)) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(dot_html(f"... {len(lines) - max_lines} more"))
    border, fill = COMMUNICATION
    heading = f"run eagerly {side} this chain's first call (between compiled graphs, not in this trace)"
    label = f"<<B>{dot_html(heading)}</B><BR/>" + '<BR ALIGN="LEFT"/>'.join(shown) + '<BR ALIGN="LEFT"/>>'
    name = f"between_{side}"
    g.node(name, label=label, shape="note", style="filled,dashed", fillcolor=fill, color=border, fontsize="9")
    return name


def legend(g, executors: Iterable[str], heat: bool, t_max: float) -> None:
    cells = []
    for ex in executors:
        border, fill = COMMUNICATION if ex == "communication" else executor_colors(ex)
        cells.append(f'<TD BGCOLOR="{fill}" COLOR="{border}" BORDER="2">{dot_html(ex)}</TD>')
    if heat:
        for f in (0.0, 0.5, 1.0):
            cells.append(f'<TD BGCOLOR="{heat_color(f)}">{dot_html(format_us(t_max * f))}</TD>')
    g.node("legend", label=f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2"><TR>{"".join(cells)}</TR></TABLE>>',
           shape="plaintext", style="", fontsize="9")

