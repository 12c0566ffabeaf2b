"""Fusion diagrams: the dataflow graph of a trace as Graphviz DOT, SVG or PNG.

Each fusion is a cluster (or, with ``collapse=True``, one node) coloured by its executor; edges
carry the shape and dtype of the value they pass; nodes show the op and the source line it came
from; kernel times, when given, colour fusions and ops from pale (fast) to red (slow). ``module``
keeps only the symbols of one module path (``model.layers.0`` keeps ``model.layers.0`` and
``model.layers.0.attn`` but not ``model.layers.01``) plus the values flowing into them.

A model with repeated blocks (``model.layers.0`` ... ``model.layers.23``) is drawn one box per
module block (:mod:`thundervis.dot_blocks`), each expanded on request (``expand``).

DOT is built with the ``graphviz`` package. Rendering (:mod:`thundervis.dot_render`) uses a ``dot``
binary when one is on PATH, else ``pygraphviz``, in a child process whose stderr is dropped.
Recorded text reaches DOT through two functions only: :func:`dot_text` (quoted strings) and
:func:`dot_html` (HTML-like labels); nothing from a recording is executed.
"""
from __future__ import annotations

import html
from typing import Iterable, Optional

from thundervis.present.units import format_us
from thundervis.compiler.collectives import is_communication
from thundervis.compiler.ir import BoundSymbol, Trace, TensorProxy, short_dtype

from thundervis import dot_blocks
from thundervis.dot_render import FORMATS, RenderError, render, write_diagram  # noqa: F401  (this module's API)
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
# Graphviz's layout needs memory and time superlinear in the graph and can crash on huge ones:
# a diagram holds at most this many op nodes (fusions drawn collapsed first when that fits).
MAX_DIAGRAM_NODES = 5000


def diagram_nodes(symbols, collapse: bool) -> int:
    """Return how many op nodes a diagram of ``symbols`` draws (a fusion's members when not
    collapsed, else one node per fusion)."""
    return sum(1 if collapse or not is_fusion(b) else max(1, len(b.subsymbols)) for b in symbols)




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


def _drawn_symbols(trace: Trace, module: Optional[str]) -> list[BoundSymbol]:
    """The top-level symbols a diagram draws: all but ``del``, only ``module``'s when given
    (ValueError naming the modules when it matches none)."""
    symbols = [b for b in trace.symbols if b.sym != "del"]
    if module:
        kept = [b for b in symbols if _matches(b, module)]
        if not kept:
            mods = modules_of(trace)
            shown = ", ".join(mods[:12]) + (", …" if len(mods) > 12 else "")
            raise ValueError(f"no symbol of graph {trace.graph} {trace.chain} comes from module {module!r} "
                             f"(modules: {shown or 'none recorded'})")
        symbols = kept
    return symbols


def _plan_blocks(symbols, blocks: Optional[bool], expand) -> tuple[list, set]:
    """Return (the module blocks drawn, the paths of those expanded): none when ``blocks`` is
    False, or None and the symbols repeat too few numbered blocks (and nothing is expanded)."""
    found = dot_blocks.module_blocks(symbols)
    if blocks is None:
        blocks = dot_blocks.wants_blocks(found) or bool(expand)
    found = found if blocks else []
    return found, dot_blocks.expanded_paths(found, expand)


def diagram_blocks(trace: Trace, *, module: Optional[str] = None, blocks: Optional[bool] = None,
                   expand: Optional[Iterable[str]] = None) -> list[dict]:
    """Return the module blocks :func:`trace_graph` draws with the same options, as
    ``[{"id": SVG node id, "path": module path, "expanded": bool}]`` (empty: drawn op by op)."""
    found, opened = _plan_blocks(_drawn_symbols(trace, module), blocks, expand)
    return [{"id": b.node_id, "path": b.path, "expanded": b.path in opened} for b in found]


def trace_graph(trace: Trace, *, collapse: bool = False, module: Optional[str] = None,
                timings: Optional[dict] = None, title: Optional[str] = None, max_label: int = 40,
                between: Optional[dict] = None, blocks: Optional[bool] = None,
                expand: Optional[Iterable[str]] = None):
    """Return a ``graphviz.Digraph`` of ``trace`` (see module doc). ``timings`` maps a kernel name
    or a symbol uid to its time in µs. ``between``: ``{"before": [lines], "after": [lines]}``, the
    collectives run eagerly right before and after the chain (drawn as communication notes above
    and below the graph). ``blocks``: group the symbols by module block (thundervis.dot_blocks),
    each block one node unless ``expand`` names it (then a cluster of its ops); None: only when the
    trace repeats numbered blocks. Raise ValueError naming the modules when ``module`` matches no
    symbol, or the blocks when ``expand`` names none."""
    import graphviz

    timings = dict(timings or {})
    symbols = _drawn_symbols(trace, module)

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

    all_blocks, opened = _plan_blocks(symbols, blocks, expand)
    block_of_uid = {b.uid: blk for blk in all_blocks for b in blk.symbols}
    folded = {blk.path: blk for blk in all_blocks if blk.path not in opened}
    block_time = {blk.path: sum(t for t in (time_of(b) for b in blk.symbols) if t is not None)
                  for blk in folded.values()}
    times = [t for t in (time_of(b) for b in symbols if block_of_uid.get(b.uid) is None
                         or block_of_uid[b.uid].path in opened) if t is not None]
    times += [t for t in block_time.values() if t > 0]
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

    # Folded blocks: one node each, standing for every value their symbols produce.
    for blk in folded.values():
        for b in blk.symbols:
            for p in b.flat_outputs():
                producer[p.name] = blk.node_id
    folded_ids = {blk.node_id for blk in folded.values()}
    returned = {p.name for p in trace.flat_outputs()}
    block_graphs = {p: graphviz.Digraph(name=f"cluster_{blk.node_id}") for blk in all_blocks
                    for p in (blk.path,) if p in opened}
    drawn_blocks: set[str] = set()
    sub_graphs: dict[tuple[str, str], object] = {}

    for b in symbols:
        ex = b.executor or ""
        if ex:
            used_executors.add(ex)
        blk = block_of_uid.get(b.uid)
        if blk is not None and blk.path in folded:
            if blk.path not in drawn_blocks:  # the node is written once the values it reads are known
                drawn_blocks.add(blk.path)
                ends["n"].append(blk.node_id)
                used_executors.update(blk.executors())
            continue
        target = g
        if blk is not None:  # an expanded block: one nested cluster per submodule (self_attn, mlp ...)
            sub = dot_blocks.submodule_of(b, blk.path)
            target = block_graphs[blk.path]
            if sub:
                if (blk.path, sub) not in sub_graphs:
                    sub_graphs[(blk.path, sub)] = graphviz.Digraph(name=f"cluster_{blk.node_id}_{len(sub_graphs)}")
                target = sub_graphs[(blk.path, sub)]
        border, fill = executor_colors(ex or None)
        t = time_of(b)
        heat = heat_color(t / t_max) if t is not None and t_max > 0 else None
        if is_fusion(b) and not collapse:
            name = dot_text(f"cluster_{b.uid}")
            with target.subgraph(name=name) as c:
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
            target.node(nid, label="<" + "<BR/>".join(lab) + ">", color=border, fillcolor=heat or fill,
                   penwidth="2", fontcolor="white" if hot else "black", tooltip=_tooltip(_tooltip_text(b)))
        elif is_communication(b.sym):
            used_executors.add("communication")
            target.node(nid, label=_node_label(b, t, max_label), color=COMMUNICATION[0], shape="hexagon",
                   fillcolor=heat or COMMUNICATION[1], penwidth="2",
                   tooltip=_tooltip("communication: " + _tooltip_text(b)))
        else:
            target.node(nid, label=_node_label(b, t, max_label), color=border,
                        fillcolor=heat or ("white" if ex in ("", "torch") else fill),
                        tooltip=_tooltip(_tooltip_text(b)))
        connect(b, nid)
        for p in b.flat_outputs():
            producer[p.name] = nid

    # Each returned value gets a small marker under its producer (one shared "return" node would
    # pull an edge from every corner of the graph).
    for p in dict.fromkeys(trace.flat_outputs()):
        src = producer.get(p.name)
        if src is None or src in folded_ids:  # a trace input returned as is; a block counts its own
            continue
        out = new_id("out")
        ends["out"].append(out)
        g.node(out, label=f"<<B>{dot_html(p.name)}</B> → out>", shape="cds", style="filled",
               fillcolor="#eef3f8", color="#8aa4c0", fontsize="8", height="0.2", margin="0.04,0.01")
        edges.append((src, out, _type(p)))
    for (path, name), nested in sub_graphs.items():
        nested.attr(label=f"<{dot_html(name[len(path) + 1:])}>", style="rounded,dotted", color="#7a93ad",
                    fontsize="10", penwidth="1")
        block_graphs[path].subgraph(nested)
    for path, sub in block_graphs.items():
        sub.attr(label=f"<<B>{dot_html(path)}</B>>", style="rounded,dashed", color="#4a6a8a",
                 fontsize="11", penwidth="1.5")
        g.subgraph(sub)
    for src, dst, lab in edges:
        g.edge(src, dst, label=dot_text(lab))
    block_in, shared = _block_edges(folded.values(), producer, input_names)
    for blk in folded.values():
        t = block_time[blk.path] or None
        heat = heat_color(t / t_max) if t is not None and t_max > 0 else None
        n_out = len({p.name for b in blk.symbols for p in b.flat_outputs() if p.name in returned})
        g.node(blk.node_id, **_block_node(blk, t, heat, t_max, max_label, n_out, shared.get(blk.node_id)))
    for src, dst, lab in block_in:
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


def _block_node(blk, time_us: Optional[float], heat: Optional[str], t_max: float, max_label: int,
                n_out: int = 0, shared: Optional[list] = None) -> dict:
    """Return the node attributes of a folded block: its path, what it holds, how many of the
    trace's outputs it returns, the values it reads that many blocks share (``shared``: proxies),
    its source lines grouped per file, its time; its SVG id is the block's node id (the widget
    expands on click)."""
    from thundervis.present.kernel_rows import group_sources
    n_k, ops = len(blk.kernels), [b for b in blk.ops if b.sym != "del"]
    n_torch = sum(1 for b in ops if (b.executor or "torch") == "torch")
    held = [f"{n_k} kernel{'s' if n_k != 1 else ''}"] if n_k else []
    if ops:
        held.append(f"{len(ops)} op{'s' if len(ops) != 1 else ''}" + (f" ({n_torch} on torch)" if n_torch else ""))
    rows = [f'<B>{dot_html(blk.path)}</B> <FONT POINT-SIZE="8">▸</FONT>',
            f'<FONT POINT-SIZE="9">{dot_html(" · ".join(held) or "no ops")}</FONT>']
    if shared:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">reads {len(shared)} shared value'
                    f'{"s" if len(shared) != 1 else ""} ({dot_html(_short(", ".join(_type(p) for p in shared), max_label))})</FONT>')
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
            "tooltip": _tooltip(_short(f"{blk.path}: {' · '.join(held)}; expand it to see its ops", 300))}


def _block_edges(folded, producer: dict, input_names: set, fan_out: int = 3) -> tuple[list, dict]:
    """Return ``(edges, shared)``: ``edges`` as ``(src, dst, label)``, one per (producer, folded
    block) pair passing values into the block, labelled with the value's type or ``N values``;
    ``shared`` maps a block's node id to the values it reads that more than ``fan_out`` blocks read
    (masks, rotary tables: named in the block, not drawn as edges across the whole diagram). Trace
    inputs (weights) are not drawn."""
    into: dict[tuple[str, str], list] = {}
    for blk in folded:
        for b in blk.symbols:
            for p in b.flat_inputs():
                src = producer.get(p.name)
                if src is None or src == blk.node_id or p.name in input_names:
                    continue
                values = into.setdefault((src, blk.node_id), [])
                if p.name not in (v.name for v in values):
                    values.append(p)
    readers: dict[str, int] = {}
    for vals in into.values():
        for p in vals:
            readers[p.name] = readers.get(p.name, 0) + 1
    edges, shared = [], {}
    for (src, dst), vals in into.items():
        wide = [p for p in vals if readers[p.name] > fan_out]
        if wide:
            shared.setdefault(dst, []).extend(wide)
        vals = [p for p in vals if readers[p.name] <= fan_out]
        if vals:
            edges.append((src, dst, _type(vals[0]) if len(vals) == 1 else f"{len(vals)} values"))
    return edges, shared


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


def trace_to_svg(trace: Trace, **options) -> str:
    """Return the diagram of ``trace`` as SVG text (same options as :func:`trace_graph`)."""
    return render(trace_to_dot(trace, **options), "svg").decode()
