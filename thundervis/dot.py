"""Fusion diagrams: the dataflow graph of a trace as Graphviz DOT, SVG or PNG.

Each fusion is a cluster (or, with ``collapse=True``, one node) coloured by its executor; edges
carry the shape and dtype of the value they pass; nodes show the op and the source line it came
from; kernel times, when given, colour fusions and ops from pale (fast) to red (slow). ``module``
keeps only the symbols of one module path (``model.layers.0`` keeps ``model.layers.0`` and
``model.layers.0.attn`` but not ``model.layers.01``) plus the values flowing into them.

DOT is built with the ``graphviz`` package. Rendering uses a ``dot`` binary when one is on PATH,
else ``pygraphviz``, whose wheels bundle Graphviz, so a pip-only install renders SVG and PNG.
Recorded text reaches DOT through two functions only: :func:`dot_text` (quoted strings) and
:func:`dot_html` (HTML-like labels); nothing from a recording is executed.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
from typing import Iterable, Optional

from thundervis.present.units import format_us
from thundervis.compiler.collectives import is_communication
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy, short_dtype

from thundervis.diff.lines import is_fusion
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
FORMATS = ("svg", "png", "dot", "pdf")


# Graphviz's layout needs memory and time superlinear in the graph and can crash on huge ones:
# a diagram holds at most this many op nodes (fusions drawn collapsed first when that fits).
MAX_DIAGRAM_NODES = 5000


def diagram_nodes(symbols, collapse: bool) -> int:
    """Return how many op nodes a diagram of ``symbols`` draws (a fusion's members when not
    collapsed, else one node per fusion)."""
    return sum(1 if collapse or not is_fusion(b) else max(1, len(b.subsymbols)) for b in symbols)


class RenderError(Exception):
    """The diagram cannot be rendered (no Graphviz available, or Graphviz failed); one sentence."""


def executor_colors(executor: Optional[str]) -> tuple[str, str]:
    """Return (border, fill) colours for an executor name."""
    return PALETTE.get(executor or "", _OTHER)


def heat_color(fraction: float) -> str:
    """Return the heat colour for ``fraction`` in [0, 1] (0: pale, 1: red) as ``#rrggbb``."""
    f = min(max(fraction, 0.0), 1.0)
    lo, mid, hi = _HEAT
    a, b, t = (lo, mid, f * 2) if f < 0.5 else (mid, hi, f * 2 - 1)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _module_of(b: BoundSymbol) -> str:
    if b.source is not None and b.source.module:
        return b.source.module
    for s in b.subsymbols:
        m = _module_of(s)
        if m:
            return m
    return ""


def _in_module(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def modules_of(trace: Trace) -> list[str]:
    """Return the module paths the trace's symbols come from, sorted."""
    mods = set()
    for b in trace.walk():
        if b.source is not None and b.source.module:
            mods.add(b.source.module)
    return sorted(mods)


def _matches(b: BoundSymbol, prefix: str) -> bool:
    if b.source is not None and b.source.module and _in_module(b.source.module, prefix):
        return True
    return is_fusion(b) and any(_matches(s, prefix) for s in b.subsymbols)


def _type(p: TensorProxy) -> str:
    return f"{short_dtype(p.dtype)}[{', '.join(str(s) for s in p.shape)}]"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _op_name(b: BoundSymbol) -> str:
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


def _tooltip(text: str) -> str:
    return dot_text(text)


def _node_label(b: BoundSymbol, time_us: Optional[float], max_label: int) -> str:
    rows = [f"<B>{dot_html(_op_name(b))}</B>"]
    outs = b.flat_outputs()
    if outs:
        rows.append(f'<FONT POINT-SIZE="8">{dot_html(_short(" ".join(o.name for o in outs), max_label))}</FONT>')
    if b.source is not None and b.source.line:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{dot_html(b.source.label())}</FONT>')
    if time_us is not None:
        rows.append(f'<FONT POINT-SIZE="8"><B>{dot_html(format_us(time_us))}</B></FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def _fusion_title(b: BoundSymbol, time_us: Optional[float]) -> str:
    n = len(b.subsymbols)
    parts = [f"<B>{dot_html(b.sym)}</B>", dot_html(b.executor or "?"), f"{n} op{'s' if n != 1 else ''}"]
    if time_us is not None:
        parts.append(f"<B>{dot_html(format_us(time_us))}</B>")
    return "<" + " · ".join(parts) + ">"


def _tooltip_text(b: BoundSymbol) -> str:
    s = b.source
    where = f"{s.label()}  {s.code}" if s is not None and s.line else ""
    mod = f"  [{s.module}]" if s is not None and s.module else ""
    return _short(f"{b.sym}  {where}{mod}".strip(), 300)


def trace_graph(trace: Trace, *, collapse: bool = False, module: Optional[str] = None,
                timings: Optional[dict] = None, title: Optional[str] = None, max_label: int = 40,
                between: Optional[dict] = None):
    """Return a ``graphviz.Digraph`` of ``trace`` (see module doc). ``timings`` maps a kernel name
    or a symbol uid to its time in µs. ``between``: ``{"before": [lines], "after": [lines]}``, the
    collectives run eagerly right before and after the chain (drawn as communication notes above
    and below the graph). Raise ValueError naming the modules when ``module`` matches no symbol."""
    import graphviz

    timings = dict(timings or {})
    symbols = [b for b in trace.symbols if b.sym != "del"]
    if module:
        kept = [b for b in symbols if _matches(b, module)]
        if not kept:
            mods = modules_of(trace)
            shown = ", ".join(mods[:12]) + (", …" if len(mods) > 12 else "")
            raise ValueError(f"no symbol of graph {trace.graph} {trace.chain} comes from module {module!r} "
                             f"(modules: {shown or 'none recorded'})")
        symbols = kept

    n_nodes = diagram_nodes(symbols, collapse)
    if n_nodes > MAX_DIAGRAM_NODES and not collapse and diagram_nodes(symbols, True) <= MAX_DIAGRAM_NODES:
        collapse = True  # too big to draw every op of every fusion: one node per fusion
        title = (title or f"graph {trace.graph} · {trace.chain} · after {trace.pass_name}") + \
            f" · fusions collapsed ({n_nodes} ops)"
        n_nodes = diagram_nodes(symbols, True)
    if n_nodes > MAX_DIAGRAM_NODES:
        mods = modules_of(trace)
        shown = ", ".join(mods[:6]) + (", …" if len(mods) > 6 else "")
        raise ValueError(f"graph {trace.graph} {trace.chain} after {trace.pass_name} has {n_nodes} ops, more than "
                         f"a diagram can show ({MAX_DIAGRAM_NODES}); draw one module with --module"
                         + (f" (modules: {shown})" if shown else ""))

    def time_of(b: BoundSymbol) -> Optional[float]:
        t = timings.get(b.uid)
        return timings.get(b.sym) if t is None and is_fusion(b) else t

    times = [t for t in (time_of(b) for b in symbols) if t is not None]
    t_max = max(times) if times else 0.0

    g = graphviz.Digraph(name=dot_text(f"{trace.chain}_{trace.graph}"))
    label = title or f"graph {trace.graph} · {trace.chain} · after {trace.pass_name}" + \
        (f" · module {module}" if module else "")
    g.attr(rankdir="TB", fontname="Helvetica", fontsize="12", labelloc="t", label=dot_text(label),
           nodesep="0.25", ranksep="0.35", newrank="true")
    g.attr("node", shape="box", style="rounded,filled", fillcolor="white", fontname="Helvetica",
           fontsize="10", margin="0.08,0.04", height="0.3")
    g.attr("edge", fontname="Helvetica", fontsize="8", color="#666666", fontcolor="#444444",
           arrowsize="0.6")

    producer: dict[str, str] = {}  # proxy name -> node id
    used_executors: set[str] = set()
    n_ids = iter(range(1 << 30))

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(n_ids)}"
    ends: dict[str, list] = {"n": [], "out": []}  # symbol nodes and output markers, for the notes

    # Trace inputs (parameters, activations) are drawn next to each consumer rather than as one
    # shared node: a shared node at the top drags long edges across a large graph.
    input_names = {p.name for p in trace.inputs}

    edges: list[tuple[str, str, str]] = []
    seen_edges: set[tuple[str, str, str]] = set()

    def connect(b: BoundSymbol, nid: str) -> None:
        for p in b.flat_inputs():
            src = producer.get(p.name)
            value_label = (f"<<B>{dot_html(p.name)}</B><BR/><FONT POINT-SIZE=\"8\">"
                           f"{dot_html(_type(p))}</FONT>>")
            if src is None and p.name in input_names:
                src = new_id("in")
                g.node(src, label=value_label, shape="ellipse", style="filled", fillcolor="#eef3f8",
                       color="#8aa4c0", fontsize="9", margin="0.04,0.02")
            elif src is None:  # a value from outside the module: one boundary node per value
                src = new_id("bd")
                producer[p.name] = src
                g.node(src, label=value_label, shape="ellipse", style="dashed,filled", fillcolor="#f7f7f7",
                       color="#999999", fontsize="9", margin="0.04,0.02")
            key = (src, nid, p.name)
            if key not in seen_edges:
                seen_edges.add(key)
                edges.append((src, nid, _type(p)))

    for b in symbols:
        ex = b.executor or ""
        if ex:
            used_executors.add(ex)
        border, fill = executor_colors(ex or None)
        t = time_of(b)
        heat = heat_color(t / t_max) if t is not None and t_max > 0 else None
        if is_fusion(b) and not collapse:
            name = dot_text(f"cluster_{b.uid}")
            with g.subgraph(name=name) as c:
                # On a heat fill the title must contrast with it: white on the red end.
                title_color = border if heat is None else ("white" if t / t_max > 0.75 else "#222222")
                c.attr(label=_fusion_title(b, t), style="rounded,filled", color=border,
                       fillcolor=heat or fill, penwidth="2", fontsize="10", fontcolor=title_color,
                       tooltip=_tooltip(_tooltip_text(b)))
                for s in b.subsymbols:
                    sid = new_id("n")
                    ends["n"].append(sid)
                    c.node(sid, label=_node_label(s, None, max_label), color=border, fillcolor="white",
                           tooltip=_tooltip(_tooltip_text(s)))
                    connect(s, sid)
                    for p in s.flat_outputs():
                        producer[p.name] = sid
            continue
        nid = new_id("n")
        ends["n"].append(nid)
        if is_fusion(b):  # collapsed fusion: one node for the kernel
            ops = ", ".join(_op_name(s) for s in b.subsymbols)
            srcs = list(dict.fromkeys(s.source.label() for s in b.subsymbols if s.source and s.source.line))
            lab = [f"<B>{dot_html(b.sym)}</B>",
                   f'<FONT POINT-SIZE="8">{dot_html(_short(ops, max_label * 2))}</FONT>']
            if srcs:
                lab.append(f'<FONT POINT-SIZE="8" COLOR="#555555">'
                           f'{dot_html(_short(", ".join(srcs), max_label * 2))}</FONT>')
            if t is not None:
                lab.append(f'<FONT POINT-SIZE="8"><B>{dot_html(format_us(t))}</B></FONT>')
            hot = heat is not None and t / t_max > 0.75
            g.node(nid, label="<" + "<BR/>".join(lab) + ">", color=border, fillcolor=heat or fill,
                   penwidth="2", fontcolor="white" if hot else "black", tooltip=_tooltip(_tooltip_text(b)))
        elif is_communication(b.sym):
            used_executors.add("communication")
            g.node(nid, label=_node_label(b, t, max_label), color=COMMUNICATION[0], shape="hexagon",
                   fillcolor=heat or COMMUNICATION[1], penwidth="2",
                   tooltip=_tooltip("communication: " + _tooltip_text(b)))
        else:
            g.node(nid, label=_node_label(b, t, max_label), color=border,
                   fillcolor=heat or ("white" if ex in ("", "torch") else fill),
                   tooltip=_tooltip(_tooltip_text(b)))
        connect(b, nid)
        for p in b.flat_outputs():
            producer[p.name] = nid

    # Each returned value gets a small marker under its producer (one shared "return" node would
    # pull an edge from every corner of the graph).
    for p in dict.fromkeys(trace.flat_outputs()):
        src = producer.get(p.name)
        if src is None:  # a trace input returned as it is
            continue
        out = new_id("out")
        ends["out"].append(out)
        g.node(out, label=f"<<B>{dot_html(p.name)}</B> ⟶ out>", shape="cds", style="filled",
               fillcolor="#eef3f8", color="#8aa4c0", fontsize="8", height="0.2", margin="0.04,0.01")
        edges.append((src, out, _type(p)))
    for src, dst, lab in edges:
        g.edge(src, dst, label=dot_text(lab))
    for side in ("before", "after"):
        lines = (between or {}).get(side) or []
        if lines:
            used_executors.add("communication")
            note = _between_note(g, side, lines)
            # Invisible edges keep the note above the first op or below the outputs.
            if side == "before" and ends["n"]:
                g.edge(note, ends["n"][0], style="invis")
            for end in (ends["out"] or ends["n"][-1:]) if side == "after" else ():
                g.edge(end, note, style="invis")
    if used_executors - {"torch"} or times:
        _legend(g, sorted(used_executors), bool(times), t_max)
    return g


def _between_note(g, side: str, lines: list, max_lines: int = 12) -> str:
    """Draw the note of the collectives run eagerly right ``side`` (before, after) the chain's first
    call; return its node id."""
    shown = [dot_html(_short(line, 100)) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(dot_html(f"... {len(lines) - max_lines} more"))
    border, fill = COMMUNICATION
    heading = f"run eagerly {side} this chain's first call (between compiled graphs, not in this trace)"
    label = f"<<B>{dot_html(heading)}</B><BR/>" + '<BR ALIGN="LEFT"/>'.join(shown) + '<BR ALIGN="LEFT"/>>'
    name = f"between_{side}"
    g.node(name, label=label, shape="note", style="filled,dashed", fillcolor=fill, color=border, fontsize="9")
    return name


def _legend(g, executors: Iterable[str], heat: bool, t_max: float) -> None:
    cells = []
    for ex in executors:
        border, fill = COMMUNICATION if ex == "communication" else executor_colors(ex)
        cells.append(f'<TD BGCOLOR="{fill}" COLOR="{border}" BORDER="2">{dot_html(ex)}</TD>')
    if heat:
        for f in (0.0, 0.5, 1.0):
            cells.append(f'<TD BGCOLOR="{heat_color(f)}">{dot_html(format_us(t_max * f))}</TD>')
    g.node("legend", label=f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2"><TR>{"".join(cells)}</TR></TABLE>>',
           shape="plaintext", style="", fontsize="9")


def trace_to_dot(trace: Trace, **options) -> str:
    """Return the DOT source of :func:`trace_graph` (same options)."""
    return trace_graph(trace, **options).source


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
    try:
        import pygraphviz
    except ImportError:
        raise RenderError("rendering needs Graphviz: install pygraphviz (pip install pygraphviz) or the "
                          "Graphviz 'dot' program, or write .dot") from None
    # In a child process: Graphviz can crash (SIGSEGV) or exhaust memory on a pathological graph,
    # which must be one sentence here, not the end of the command.
    code = ("import sys, pygraphviz\n"
            "data = pygraphviz.AGraph(string=sys.stdin.buffer.read().decode()).draw(format=sys.argv[1], prog='dot')\n"
            "sys.stdout.buffer.write(data)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code, fmt], input=dot_source.encode(), capture_output=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RenderError(f"Graphviz took longer than {timeout_s:.0f} s; try --collapse or --module") from None
    if proc.returncode != 0:
        msg = [ln for ln in proc.stderr.decode(errors="replace").strip().splitlines() if ln.strip()]
        why = msg[-1] if msg else (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                                   else f"exit code {proc.returncode}")
        raise RenderError(f"Graphviz failed: {visible_line(why)[:300]}")
    return proc.stdout


def trace_to_svg(trace: Trace, **options) -> str:
    """Return the diagram of ``trace`` as SVG text (same options as :func:`trace_graph`)."""
    return render(trace_to_dot(trace, **options), "svg").decode()


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
