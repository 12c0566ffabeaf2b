"""The trace printer: any :class:`Trace` as runnable Python, with optional annotations.

Kept apart from the IR (jax-core style). The printed text runs with the namespace from
:func:`exec_namespace` (``torch``, ``aten``, ``prims`` and the fusion callables).
"""
from __future__ import annotations

from dataclasses import dataclass
from keyword import iskeyword

from .ir import BoundSymbol, Trace, TensorProxy
from .values import format_value, is_valid_name


@dataclass(frozen=True)
class PrintOptions:
    """What to show: tensor metadata comments, source-line comments, subsymbols to which depth,
    the header line, and uids; ``width``: the column the ``def`` line and the inputs comment wrap at."""

    shapes: bool = True
    source: bool = True
    subsymbol_depth: int = 1
    header: bool = True
    uids: bool = False
    width: int = 100


def _outputs(b: BoundSymbol) -> str:
    out = b.outputs
    if out is None:
        return ""
    if isinstance(out, TensorProxy):
        return f"{out.name} = "
    if isinstance(out, (tuple, list)):
        names = [o.name if isinstance(o, TensorProxy) else "_" for o in out]
        if not names:
            return ""
        return "(" + ", ".join(names) + (",) = " if len(names) == 1 else ") = ")
    return "_ = "


def call_text(b: BoundSymbol, callee: str | None = None) -> str:
    """Return the Python statement for one bound symbol, e.g. ``t2 = prims.add(t0, t1)``."""
    if b.sym == "del":
        return "del " + ", ".join(p.name for p in b.args)
    parts = [format_value(a) for a in b.args]
    named = {k: v for k, v in b.kwargs.items() if isinstance(k, str) and is_valid_name(k) and not iskeyword(k)}
    parts += [f"{k}={format_value(v)}" for k, v in named.items()]
    if len(named) != len(b.kwargs):  # a key that is not an identifier goes in as a string literal
        rest = ", ".join(f"{repr(str(k))}: {format_value(v)}" for k, v in b.kwargs.items() if k not in named)
        parts.append(f"**{{{rest}}}")
    return f"{_outputs(b)}{callee or b.sym}({', '.join(parts)})"


def comment_text(text: object) -> str:
    """Return ``text`` safe inside a ``#`` comment of generated code: every character that is not
    printable (newlines, escapes, bidi controls) written as its ``repr()`` escape, so the comment
    cannot end early and nothing after it becomes code."""
    s = str(text)
    return s if s.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def _meta_comment(b: BoundSymbol) -> str:
    outs = b.flat_outputs()
    return "  ".join(f"{p.name}: {p.short()}" for p in outs)


def _source_comment(b: BoundSymbol, indent: str, last_src: list) -> str | None:
    """Return the ``# file.py:LINE  code   [module]`` line when ``b``'s source differs from the
    previous top-level symbol's, else None (``last_src`` holds that previous source)."""
    src = b.source
    key = (src.file, src.line, src.module)
    if key == last_src[0]:
        return None
    last_src[0] = key
    mod = f"   [{src.module}]" if src.module else ""
    where = f"{src.label()}  {src.code}" if src.line else ""
    return f"{indent}# {where}{mod}".rstrip()


def _body_lines(b: BoundSymbol, opts: PrintOptions, indent: str, depth: int, memo: dict | None) -> list[str]:
    """Return the statement line of ``b`` and its subsymbols' lines: everything but the source
    comment, so it depends on ``b`` alone (which is what makes it memoizable)."""
    if memo is not None:
        # The printed body depends only on these fields; passes that rebuild a symbol with
        # dataclasses.replace keep its args/kwargs/outputs/subsymbols objects, so the text is reused
        # even for a new BoundSymbol (claim only sets the executor, decompose renames ...).
        key = (depth, b.sym, id(b.args), id(b.kwargs), id(b.outputs), id(b.subsymbols),
               (b.uid, b.origin) if opts.uids else None, b.executor if b.fusion else None)
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
    stmt = indent + ("# " if depth > 0 else "") + call_text(b)
    notes = []
    if opts.shapes:
        meta = _meta_comment(b)
        if meta:
            notes.append(meta)
    if b.fusion and b.executor:  # kernel names do not say which executor built the kernel
        notes.append(f"[{b.executor}]")
    if opts.uids:
        notes.append(f"uid={b.uid}" + (f" origin={','.join(b.origin)}" if b.origin else ""))
    if notes:
        stmt = stmt.ljust(48) + "  # " + "  ".join(notes)
    lines = [stmt]
    if depth < opts.subsymbol_depth and b.subsymbols:
        sub_indent = indent + "  "
        for s in b.subsymbols:
            if s.sym == "del":
                lines.append(sub_indent + call_text(s))
            else:
                lines.extend(_body_lines(s, opts, sub_indent, depth + 1, memo))
    if memo is not None:
        memo[key] = (b, lines)  # b keeps the objects whose ids are in the key alive
    return lines


def _symbol_lines(b: BoundSymbol, opts: PrintOptions, indent: str, depth: int, last_src: list,
                  memo: dict | None = None) -> list[str]:
    if b.sym == "del":
        return [indent + call_text(b)]
    if opts.source and depth == 0 and b.source is not None:
        comment = _source_comment(b, indent, last_src)
        if comment is not None:
            return [comment, *_body_lines(b, opts, indent, depth, memo)]
    return _body_lines(b, opts, indent, depth, memo)


def header_line(trace: Trace) -> str:
    """Return the ``# graph 0 · forward · after "decompose" (0.8 ms)`` header."""
    ms = trace.meta.get("duration_ms")
    took = f" ({ms:.1f} ms)" if isinstance(ms, (int, float)) else ""
    return f'# graph {trace.graph} · {trace.chain} · after "{trace.pass_name}"{took}'


def wrap_items(first: str, items: list[str], sep: str, indent: str, last: str, width: int) -> list[str]:
    """Return ``first + sep.join(items) + last`` as lines of at most ``width`` columns where the
    items allow, breaking only after a separator; continuation lines start with ``indent``."""
    mark, gap = sep.rstrip(), sep[len(sep.rstrip()):]  # ", " -> "," then " "
    lines, line, empty = [], first, True
    for i, item in enumerate(items):
        piece = item + (last if i == len(items) - 1 else mark)
        if empty:
            line, empty = line + piece, False
        elif len(line) + len(gap) + len(piece) <= width:
            line += gap + piece
        else:
            lines.append(line)
            line = indent + piece
    if not items:
        line += last
    lines.append(line)
    return lines


def signature_lines(trace: Trace, width: int = 100) -> list[str]:
    """Return the ``def chain(a, b, ...):`` line, wrapped at ``width`` columns (continuation lines
    aligned after the parenthesis, so the text stays valid Python)."""
    fname = trace.chain if trace.chain.isidentifier() else "fn"
    first = f"def {fname}("
    return wrap_items(first, [p.name for p in trace.inputs], ", ", " " * len(first), "):", width)


def inputs_comment_lines(trace: Trace, width: int = 100) -> list[str]:
    """Return the ``# x: cpu f32[8, 64]  w: ...`` comment on the inputs, wrapped at ``width``;
    an input renamed for readability shows its FX name: ``idx: cpu i64[2, 8] (primals_3)``."""
    fx = trace.fx_names
    items = [f"{p.name}: {p.short()}" + (f" ({fx[p.name]})" if p.name in fx else "") for p in trace.inputs]
    return wrap_items("  # ", items, "  ", "  # ", "", width)


def print_trace(trace: Trace, opts: PrintOptions = PrintOptions(), memo: dict | None = None) -> str:
    """Return ``trace`` as Python source text (a ``def`` named after the chain).

    ``memo`` (optional, one dict per ``opts``, e.g. kept across the passes of a chain) caches each
    symbol's printed lines; traces are immutable, so a symbol a pass kept prints from the cache."""
    lines = []
    if opts.header:
        lines.append(header_line(trace))
    lines.extend(signature_lines(trace, opts.width))
    if opts.shapes and trace.inputs:
        lines.extend(inputs_comment_lines(trace, opts.width))
    last_src = [None]
    for b in trace.symbols:
        lines.extend(_symbol_lines(b, opts, "  ", 0, last_src, memo))
    outs = ", ".join(format_value(o) for o in trace.outputs)
    lines.append(f"  return ({outs}{',' if len(trace.outputs) == 1 else ''})")
    return "\n".join(lines) + "\n"
