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

from typing import Iterable, Optional

from thundervis.compiler.collectives import is_communication
from thundervis.compiler.ir import BoundSymbol, Trace
from thundervis.present.units import format_us, plural

from thundervis import dot_blocks
from thundervis.diff.lines import is_fusion
from thundervis.dot_labels import (COMMUNICATION, PALETTE, between_note, block_node, dot_html,  # noqa: F401
                                   dot_text, executor_colors, fusion_title, heat_color, legend, node_label,
                                   op_name, shorten, tooltip, tooltip_text, type_label)
from thundervis.dot_render import FORMATS, RenderError, render, write_diagram  # noqa: F401  (this module's API)

# Graphviz's layout needs memory and time superlinear in the graph and can crash on huge ones:
# a diagram holds at most this many op nodes (fusions drawn collapsed first when that fits).
MAX_DIAGRAM_NODES = 5000


def diagram_nodes(symbols, collapse: bool) -> int:
    """Return how many op nodes a diagram of ``symbols`` draws (a fusion's members when not
    collapsed, else one node per fusion)."""
    return sum(1 if collapse or not is_fusion(b) else max(1, len(b.subsymbols)) for b in symbols)


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


def _plan_blocks(symbols, blocks: Optional[bool], expand, fold: bool = True) -> tuple[list, set]:
    """Return (the module blocks drawn, the paths of those expanded): none when ``blocks`` is
    False, or None and the symbols repeat too few numbered blocks (and nothing is expanded); runs
    of equal layers folded into one box each unless ``fold`` is False (``dot_blocks.fold_blocks``)."""
    found = dot_blocks.module_blocks(symbols)
    if blocks is None:
        blocks = dot_blocks.wants_blocks(found) or bool(expand)
    found = found if blocks else []
    opened = dot_blocks.expanded_paths(found, expand)
    return (dot_blocks.fold_blocks(found, opened) if fold else found), opened


def diagram_blocks(trace: Trace, *, module: Optional[str] = None, blocks: Optional[bool] = None,
                   expand: Optional[Iterable[str]] = None) -> list[dict]:
    """Return the module blocks :func:`trace_graph` draws with the same options, as
    ``[{"id": SVG node id, "path": module path, "expanded": bool, "fold": "model.layers.1–22 × 22"
    or ""}]`` (empty: drawn op by op; a fold's path is its first layer's: expanding it opens that one)."""
    found, opened = _plan_blocks(_drawn_symbols(trace, module), blocks, expand)
    return [{"id": b.node_id, "path": b.path, "expanded": b.path in opened, "fold": b.fold} for b in found]


def trace_graph(trace: Trace, *, collapse: bool = False, module: Optional[str] = None,
                timings: Optional[dict] = None, title: Optional[str] = None, max_label: int = 40,
                between: Optional[dict] = None, blocks: Optional[bool] = None,
                expand: Optional[Iterable[str]] = None, fold: bool = True):
    """Return a ``graphviz.Digraph`` of ``trace`` (see module doc). ``timings`` maps a kernel name
    or a symbol uid to its time in µs. ``between``: ``{"before": [lines], "after": [lines]}``, the
    collectives run eagerly right before and after the chain (drawn as communication notes above
    and below the graph). ``blocks``: group the symbols by module block (thundervis.dot_blocks),
    each block one node unless ``expand`` names it (then a cluster of its ops); None: only when the
    trace repeats numbered blocks. Raise ValueError naming the modules when ``module`` matches no
    symbol, or the blocks when ``expand`` names none. ``fold``: draw a run of equal layers as one
    box (``model.layers.1–22 × 22``)."""
    symbols = _drawn_symbols(trace, module)
    collapse, title = _fit(trace, symbols, collapse, title)
    drawing = _Drawing(trace, symbols, dict(timings or {}), collapse, max_label, *_plan_blocks(symbols, blocks, expand, fold))
    drawing.start(title or f"graph {trace.graph} · {trace.chain} · after {trace.pass_name}"
                  + (f" · module {module}" if module else ""))
    for b in symbols:
        drawing.symbol(b)
    drawing.outputs()
    drawing.clusters_and_edges()
    drawing.folded_blocks()
    drawing.notes(between or {})
    drawing.legend()
    return drawing.g


def _fit(trace: Trace, symbols: list, collapse: bool, title: Optional[str]) -> tuple[bool, Optional[str]]:
    """Return ``(collapse, title)`` for a diagram that fits :data:`MAX_DIAGRAM_NODES`: fusions
    collapsed (said in the title) when every op would not fit but one node per fusion does; raise
    ValueError naming the modules to draw apart when even that is too big."""
    n_nodes = diagram_nodes(symbols, collapse)
    if n_nodes > MAX_DIAGRAM_NODES and not collapse and diagram_nodes(symbols, True) <= MAX_DIAGRAM_NODES:
        collapse = True  # too big to draw every op of every fusion: one node per fusion
        title = (title or f"graph {trace.graph} · {trace.chain} · after {trace.pass_name}") + \
            f" · fusions collapsed ({plural(n_nodes, 'op')})"
        n_nodes = diagram_nodes(symbols, True)
    if n_nodes > MAX_DIAGRAM_NODES:
        mods = modules_of(trace)
        shown = ", ".join(mods[:6]) + (", …" if len(mods) > 6 else "")
        raise ValueError(f"graph {trace.graph} {trace.chain} after {trace.pass_name} has {n_nodes} ops, more than "
                         f"a diagram can show ({MAX_DIAGRAM_NODES}); draw one module with --module"
                         + (f" (modules: {shown})" if shown else ""))
    return collapse, title


class _Drawing:
    """One diagram being drawn, in the stages of :func:`trace_graph`: the graph and its style, then
    each symbol (an op node, a fusion's cluster or collapsed node, a communication hexagon, or its
    folded block), the trace's outputs, the expanded blocks' clusters and the edges, the folded
    blocks' nodes, the between-notes and the legend. ``producer`` maps a value's name to the node
    that made it, so each consumer is wired as it is drawn."""

    def __init__(self, trace: Trace, symbols: list, timings: dict, collapse: bool, max_label: int,
                 all_blocks: list, opened: set):
        import graphviz
        self.graphviz, self.trace, self.collapse, self.max_label = graphviz, trace, collapse, max_label
        self.timings, self.all_blocks, self.opened = timings, all_blocks, opened
        self.block_of_uid = {b.uid: blk for blk in all_blocks for b in blk.symbols}
        self.folded = {blk.path: blk for blk in all_blocks if blk.path not in opened}
        self.block_time = {blk.path: sum(t for t in (self.time_of(b) for b in blk.symbols) if t is not None)
                           for blk in self.folded.values()}
        times = [t for t in (self.time_of(b) for b in symbols if self.block_of_uid.get(b.uid) is None
                             or self.block_of_uid[b.uid].path in opened) if t is not None]
        self.times = times + [t for t in self.block_time.values() if t > 0]
        self.t_max = max(self.times) if self.times else 0.0
        self.producer: dict[str, str] = {}  # proxy name -> node id
        self.used_executors: set[str] = set()
        self._ids = iter(range(1 << 30))
        self.ends: dict[str, list] = {"n": [], "out": []}  # symbol nodes and output markers, for the notes
        # Trace inputs (parameters, activations) are drawn next to each consumer rather than as one
        # shared node: a shared node at the top drags long edges across a large graph.
        self.input_names = {p.name for p in trace.inputs}
        self.edges: list[tuple[str, str, str]] = []
        self.seen_edges: set[tuple[str, str, str]] = set()
        # Folded blocks: one node each, standing for every value their symbols produce.
        for blk in self.folded.values():
            for b in blk.symbols:
                for p in b.flat_outputs():
                    self.producer[p.name] = blk.node_id
        self.folded_ids = {blk.node_id for blk in self.folded.values()}
        self.block_graphs = {blk.path: graphviz.Digraph(name=f"cluster_{blk.node_id}") for blk in all_blocks
                             if blk.path in opened}
        self.drawn_blocks: set[str] = set()
        self.sub_graphs: dict[tuple[str, str], object] = {}

    def time_of(self, b: BoundSymbol) -> Optional[float]:
        t = self.timings.get(b.uid)
        return self.timings.get(b.sym) if t is None and is_fusion(b) else t

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def start(self, label: str) -> None:
        """Make the graph, titled ``label``, with the diagram's default node and edge style."""
        trace = self.trace
        self.g = g = self.graphviz.Digraph(name=dot_text(f"{trace.chain}_{trace.graph}"))
        g.attr(rankdir="TB", fontname="Helvetica", fontsize="12", labelloc="t", label=dot_text(label),
               nodesep="0.25", ranksep="0.35", newrank="true")
        g.attr("node", shape="box", style="rounded,filled", fillcolor="white", fontname="Helvetica",
               fontsize="10", margin="0.08,0.04", height="0.3")
        g.attr("edge", fontname="Helvetica", fontsize="8", color="#666666", fontcolor="#444444",
               arrowsize="0.6")

    def connect(self, b: BoundSymbol, nid: str) -> None:
        """Wire each input of ``b`` into node ``nid``: from its producer, a trace input's own
        ellipse, or a boundary node for a value made outside the drawn module."""
        for p in b.flat_inputs():
            src = self.producer.get(p.name)
            value_label = (f"<<B>{dot_html(p.name)}</B><BR/><FONT POINT-SIZE=\"8\">"
                           f"{dot_html(type_label(p))}</FONT>>")
            if src is None and p.name in self.input_names:
                src = self.new_id("in")
                self.g.node(src, label=value_label, shape="ellipse", style="filled", fillcolor="#eef3f8",
                            color="#8aa4c0", fontsize="9", margin="0.04,0.02")
            elif src is None:  # a value from outside the module: one boundary node per value
                src = self.new_id("bd")
                self.producer[p.name] = src
                self.g.node(src, label=value_label, shape="ellipse", style="dashed,filled", fillcolor="#f7f7f7",
                            color="#999999", fontsize="9", margin="0.04,0.02")
            key = (src, nid, p.name)
            if key not in self.seen_edges:
                self.seen_edges.add(key)
                self.edges.append((src, nid, type_label(p)))

    def _target(self, b: BoundSymbol, blk):
        """Return the (sub)graph ``b`` is drawn in: the diagram, or in an expanded block one nested
        cluster per submodule (self_attn, mlp ...)."""
        if blk is None:
            return self.g
        sub = dot_blocks.submodule_of(b, blk.path)
        if not sub:
            return self.block_graphs[blk.path]
        if (blk.path, sub) not in self.sub_graphs:
            self.sub_graphs[(blk.path, sub)] = self.graphviz.Digraph(
                name=f"cluster_{blk.node_id}_{len(self.sub_graphs)}")
        return self.sub_graphs[(blk.path, sub)]

    def symbol(self, b: BoundSymbol) -> None:
        """Draw one top-level symbol (a folded block's symbol only marks its block as drawn)."""
        ex = b.executor or ""
        if ex:
            self.used_executors.add(ex)
        blk = self.block_of_uid.get(b.uid)
        if blk is not None and blk.path in self.folded:
            if blk.path not in self.drawn_blocks:  # the node is written once the values it reads are known
                self.drawn_blocks.add(blk.path)
                self.ends["n"].append(blk.node_id)
                self.used_executors.update(blk.executors())
            return
        target = self._target(b, blk)
        t = self.time_of(b)
        heat = heat_color(t / self.t_max) if t is not None and self.t_max > 0 else None
        if is_fusion(b) and not self.collapse:
            self._fusion_cluster(target, b, t, heat)
            return
        nid = self.new_id("n")
        self.ends["n"].append(nid)
        self._node(target, nid, b, t, heat)
        self.connect(b, nid)
        for p in b.flat_outputs():
            self.producer[p.name] = nid

    def _fusion_cluster(self, target, b: BoundSymbol, t: Optional[float], heat: Optional[str]) -> None:
        """Draw a fusion as a cluster of its member ops, titled by the kernel."""
        border, fill = executor_colors(b.executor or None)
        with target.subgraph(name=dot_text(f"cluster_{b.uid}")) as c:
            # On a heat fill the title must contrast with it: white on the red end.
            title_color = border if heat is None else ("white" if t / self.t_max > 0.75 else "#222222")
            c.attr(label=fusion_title(b, t), style="rounded,filled", color=border,
                   fillcolor=heat or fill, penwidth="2", fontsize="10", fontcolor=title_color,
                   tooltip=tooltip(tooltip_text(b)))
            for s in b.subsymbols:
                sid = self.new_id("n")
                self.ends["n"].append(sid)
                c.node(sid, label=node_label(s, None, self.max_label), color=border, fillcolor="white",
                       tooltip=tooltip(tooltip_text(s)))
                self.connect(s, sid)
                for p in s.flat_outputs():
                    self.producer[p.name] = sid

    def _node(self, target, nid: str, b: BoundSymbol, t: Optional[float], heat: Optional[str]) -> None:
        """Draw one node: a collapsed fusion (its ops and source lines), a communication op, or an op."""
        ex, max_label = b.executor or "", self.max_label
        border, fill = executor_colors(ex or None)
        if is_fusion(b):  # collapsed fusion: one node for the kernel
            ops = ", ".join(op_name(s) for s in b.subsymbols)
            srcs = list(dict.fromkeys(s.source.label() for s in b.subsymbols if s.source and s.source.line))
            lab = [f"<B>{dot_html(b.sym)}</B>",
                   f'<FONT POINT-SIZE="8">{dot_html(shorten(ops, max_label * 2))}</FONT>']
            if srcs:
                lab.append(f'<FONT POINT-SIZE="8" COLOR="#555555">'
                           f'{dot_html(shorten(", ".join(srcs), max_label * 2))}</FONT>')
            if t is not None:
                lab.append(f'<FONT POINT-SIZE="8"><B>{dot_html(format_us(t))}</B></FONT>')
            hot = heat is not None and t / self.t_max > 0.75
            target.node(nid, label="<" + "<BR/>".join(lab) + ">", color=border, fillcolor=heat or fill,
                        penwidth="2", fontcolor="white" if hot else "black", tooltip=tooltip(tooltip_text(b)))
        elif is_communication(b.sym):
            self.used_executors.add("communication")
            target.node(nid, label=node_label(b, t, max_label), color=COMMUNICATION[0], shape="hexagon",
                        fillcolor=heat or COMMUNICATION[1], penwidth="2",
                        tooltip=tooltip("communication: " + tooltip_text(b)))
        else:
            target.node(nid, label=node_label(b, t, max_label), color=border,
                        fillcolor=heat or ("white" if ex in ("", "torch") else fill),
                        tooltip=tooltip(tooltip_text(b)))

    def outputs(self) -> None:
        """Give each returned value a small marker under its producer (one shared "return" node
        would pull an edge from every corner of the graph)."""
        for p in dict.fromkeys(self.trace.flat_outputs()):
            src = self.producer.get(p.name)
            if src is None or src in self.folded_ids:  # a trace input returned as is; a block counts its own
                continue
            out = self.new_id("out")
            self.ends["out"].append(out)
            self.g.node(out, label=f"<<B>{dot_html(p.name)}</B> → out>", shape="cds", style="filled",
                        fillcolor="#eef3f8", color="#8aa4c0", fontsize="8", height="0.2", margin="0.04,0.01")
            self.edges.append((src, out, type_label(p)))

    def clusters_and_edges(self) -> None:
        """Add the expanded blocks' clusters (their submodules nested) and every value edge."""
        for (path, name), nested in self.sub_graphs.items():
            nested.attr(label=f"<{dot_html(name[len(path) + 1:])}>", style="rounded,dotted", color="#7a93ad",
                        fontsize="10", penwidth="1")
            self.block_graphs[path].subgraph(nested)
        for path, sub in self.block_graphs.items():
            sub.attr(label=f"<<B>{dot_html(path)}</B>>", style="rounded,dashed", color="#4a6a8a",
                     fontsize="11", penwidth="1.5")
            self.g.subgraph(sub)
        for src, dst, lab in self.edges:
            self.g.edge(src, dst, label=dot_text(lab))

    def folded_blocks(self) -> None:
        """Draw each folded block's node (now that the values it reads are known) and its inputs."""
        returned = {p.name for p in self.trace.flat_outputs()}
        block_in, shared = _block_edges(self.folded.values(), self.producer, self.input_names)
        for blk in self.folded.values():
            t = self.block_time[blk.path] or None
            heat = heat_color(t / self.t_max) if t is not None and self.t_max > 0 else None
            n_out = len({p.name for b in blk.symbols for p in b.flat_outputs() if p.name in returned})
            self.g.node(blk.node_id, **block_node(blk, t, heat, self.t_max, self.max_label, n_out,
                                                  shared.get(blk.node_id)))
        for src, dst, lab in block_in:
            self.g.edge(src, dst, label=dot_text(lab))

    def notes(self, between: dict) -> None:
        """Draw the collectives run eagerly before and after the chain, kept above the first op and
        below the outputs by invisible edges."""
        for side in ("before", "after"):
            lines = between.get(side) or []
            if lines:
                self.used_executors.add("communication")
                note = between_note(self.g, side, lines)
                if side == "before" and self.ends["n"]:
                    self.g.edge(note, self.ends["n"][0], style="invis")
                for end in (self.ends["out"] or self.ends["n"][-1:]) if side == "after" else ():
                    self.g.edge(end, note, style="invis")

    def legend(self) -> None:
        """Add the legend when there is more than torch to tell apart, or a heat scale."""
        if self.used_executors - {"torch"} or self.times:
            legend(self.g, sorted(self.used_executors), bool(self.times), self.t_max)


# A value read by more than this many folded blocks (a mask, the rotary cos/sin tables), or a value
# of a producer that feeds more than this many blocks (its first reader aside), is a note on each
# reader ("reads 3 shared values (...)"), not an edge: 24 edges from one box make a fan taller than
# the diagram. Three keeps the layer -> next layer chain (and a residual skip or two) as edges.
SHARED_FAN_OUT = 3


def _block_edges(folded, producer: dict, input_names: set,
                 fan_out: int = SHARED_FAN_OUT) -> tuple[list, dict]:
    """Return ``(edges, shared)``: ``edges`` as ``(src, dst, label)``, one per (producer, folded
    block) pair passing values into the block, labelled with the value's type or ``N values``;
    ``shared`` maps a block's node id to the values it reads that more than ``fan_out`` blocks read,
    or that come from a producer feeding more than ``fan_out`` blocks, its first reader aside (named
    in the block, not drawn as edges across the whole diagram; see ``SHARED_FAN_OUT``). Trace
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
    fed: dict[str, list] = {}  # producer -> the folded blocks it passes values to, in trace order
    for (src, dst), vals in into.items():
        fed.setdefault(src, []).append(dst)
        for p in vals:
            readers[p.name] = readers.get(p.name, 0) + 1
    edges, shared = [], {}
    for (src, dst), vals in into.items():
        # a hub keeps its edge to its first reader (the next layer: the residual stream stays drawn)
        hub = len(fed[src]) > fan_out and fed[src][0] != dst
        wide = [p for p in vals if readers[p.name] > fan_out or hub]
        if wide:
            shared.setdefault(dst, []).extend(wide)
        wide_names = {p.name for p in wide}
        vals = [p for p in vals if p.name not in wide_names]
        if vals:
            edges.append((src, dst, type_label(vals[0]) if len(vals) == 1 else f"{len(vals)} values"))
    return edges, shared


def trace_to_dot(trace: Trace, **options) -> str:
    """Return the DOT source of :func:`trace_graph` (same options)."""
    return trace_graph(trace, **options).source


def trace_to_svg(trace: Trace, **options) -> str:
    """Return the diagram of ``trace`` as SVG text (same options as :func:`trace_graph`)."""
    return render(trace_to_dot(trace, **options), "svg").decode()
