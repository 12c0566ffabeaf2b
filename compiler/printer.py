"""The trace printer: any :class:`Trace` as runnable Python, with optional annotations.

Kept apart from the IR (jax-core style). The printed text runs with the namespace from
:func:`exec_namespace` (``torch``, ``aten``, ``prims`` and the fusion callables).

The printer emits structured lines once (:func:`print_lines`): each :class:`PrintedLine` has its
text, kind, the uid of the symbol it shows, its depth and spans naming its parts (the callee,
output names, tensor types, comments, source file/code/module). :func:`print_trace` is their text;
every view (CLI, TUI, widget) shows these lines, so a line reads the same everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from keyword import iskeyword
from typing import Callable, NamedTuple, Optional

from .ir import BoundSymbol, Trace, TensorProxy
from .units import format_ms
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
    # the column a statement's comment starts at (at least two spaces after the code); 0: right
    # after it (a diff's lines, which put their own notes after the comment)
    align: int = 48
    # Optional comment per top-level symbol (``torch: not lowered: ...``), from the caller: the
    # viewer passes one that makes recorded text terminal-safe. None: no such comments.
    notes: Optional[Callable[[BoundSymbol], Optional[str]]] = None


# Line kinds, in print order.
HEADER, DEF, META, SOURCE, STMT, SUB, DEL, RETURN = "header", "def", "meta", "source", "stmt", "sub", "del", "return"
# Span kinds: the callee, an output name, a tensor type (``cpu f32[8, 64]``), a comment (from its
# ``#`` to the end of the line), the executor tag, a caller's note, a uid note, the parts of a
# source comment (file label, code, module path), and the keywords def / return / del.
CALL, NAME, TYPE, COMMENT, EXECUTOR, NOTE, UID, FILE, CODE, MODULE, KEYWORD = (
    "call", "name", "type", "comment", "executor", "note", "uid", "file", "code", "module", "keyword")


class PrintedLine(NamedTuple):
    """One printed line: ``text``; ``kind`` (header, def, meta, source, stmt, sub, del, return);
    ``uid`` of the symbol it shows (a source comment: of the statement under it; None for the
    others); ``depth`` (0 top level, 1 a fusion's member ...); ``spans``: ``(start, end, kind)``
    of its parts (see the span kinds above), in order of ``start``. A tuple: the printer makes
    one per line of every recorded pass, so it must be cheap."""

    text: str
    kind: str
    uid: Optional[str] = None
    depth: int = 0
    spans: tuple = ()

    def as_json(self) -> list:
        """Return ``[text, kind, uid, depth, [[start, end, span kind], ...]]``."""
        return [self.text, self.kind, self.uid, self.depth, [list(sp) for sp in self.spans]]


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


def _meta_items(b: BoundSymbol) -> list[tuple[str, str]]:
    return [(p.name, p.short()) for p in b.flat_outputs()]


def _source_line(b: BoundSymbol, indent: str, last_src: list) -> Optional[PrintedLine]:
    """Return the ``# file.py:LINE  code   [module]`` line when ``b``'s source differs from the
    previous top-level symbol's, else None (``last_src`` holds that previous source)."""
    src = b.source
    key = (src.file, src.line, src.module)
    if key == last_src[0]:
        return None
    last_src[0] = key
    text = f"{indent}# "
    spans = [(len(indent), 0, COMMENT)]
    if src.line:
        label = src.label()
        spans.append((len(text), len(text) + len(label), FILE))
        text += label + "  "
        spans.append((len(text), len(text) + len(str(src.code)), CODE))
        text += str(src.code)
    if src.module:
        text += "   "
        spans.append((len(text), len(text) + len(src.module) + 2, MODULE))
        text += f"[{src.module}]"
    stripped = text.rstrip()
    spans[0] = (len(indent), len(stripped), COMMENT)
    spans = [(a, min(e, len(stripped)), k) for a, e, k in spans if a < len(stripped)]
    return PrintedLine(stripped, SOURCE, b.uid, 0, tuple(spans))


def _call_and_types(b: BoundSymbol, memo: dict | None) -> tuple[str, list]:
    """Return (``call_text(b)``, [(name, type) of each output]): what a statement line says of
    ``b`` whatever its executor, depth or uid; memoised by the identity of the objects they come
    from, so the symbols a pass rebuilds around the same arguments (claim sets executors, fuse
    makes the claimed symbols members) print them once per chain."""
    if memo is None:
        return call_text(b), [(p.name, p.short()) for p in b.flat_outputs()]
    key = ("call", b.sym, id(b.args), id(b.kwargs), id(b.outputs))
    hit = memo.get(key)
    if hit is None:  # the entry keeps the objects whose ids are in the key alive
        hit = memo[key] = (b.args, b.kwargs, b.outputs, call_text(b), [(p.name, p.short()) for p in b.flat_outputs()])
    return hit[3], hit[4]


def _statement(b: BoundSymbol, opts: PrintOptions, indent: str, depth: int, memo: dict | None = None) -> PrintedLine:
    """Return the statement line of ``b`` (a subsymbol's commented out) with its spans; ``memo``:
    a :func:`print_lines` memo that :func:`_call_and_types` may use."""
    if depth > 0:
        prefix = indent + "# "
        spans = [(len(indent), len(indent) + 1, COMMENT)]
    else:
        prefix, spans = indent, []
    pos = len(prefix)
    out = b.outputs
    if isinstance(out, TensorProxy):
        spans.append((pos, pos + len(out.name), NAME))
    elif isinstance(out, (tuple, list)) and out:
        at = pos + 1
        for o in out:
            n = len(o.name) if isinstance(o, TensorProxy) else 1
            if n > 1 or isinstance(o, TensorProxy):
                spans.append((at, at + n, NAME))
            at += n + 2
    code, types = _call_and_types(b, memo)
    stmt = prefix + code
    callee = stmt.find(b.sym + "(", pos)
    if callee >= 0:
        spans.append((callee, callee + len(b.sym), CALL))
    has_meta = opts.shapes and b.outputs is not None
    if has_meta or (b.executor and (b.fusion or depth == 0)) or opts.uids:
        stmt = stmt.ljust(opts.align) + "  "
        start = len(stmt)
        spans.append((start, 0, COMMENT))
        stmt += "# "
        first = True
        if has_meta:
            for name, short in types:
                stmt += f"{name}: " if first else f"  {name}: "
                first = False
                spans.append((len(stmt), len(stmt) + len(short), TYPE))
                stmt += short
        if b.executor and (b.fusion or depth == 0):  # who runs it (a fusion's members: its kernel)
            if not first:
                stmt += "  "
            first = False
            tag = f"[{b.executor}]"
            spans.append((len(stmt), len(stmt) + len(tag), EXECUTOR))
            stmt += tag
        if opts.uids:
            if not first:
                stmt += "  "
            first = False
            tag = f"uid={b.uid}" + (f" origin={','.join(b.origin)}" if b.origin else "")
            spans.append((len(stmt), len(stmt) + len(tag), UID))
            stmt += tag
        if first:  # no tensor output and nothing else to say: no comment
            spans.pop()
            return PrintedLine(prefix + code, STMT if depth == 0 else SUB, b.uid, depth, tuple(spans))
        spans = _close_comment(spans, len(stmt))
    return PrintedLine(stmt, STMT if depth == 0 else SUB, b.uid, depth, tuple(spans))


def _output_names(b: BoundSymbol) -> list[str]:
    out = b.outputs
    if isinstance(out, TensorProxy):
        return [out.name]
    if isinstance(out, (tuple, list)):
        return [o.name for o in out if isinstance(o, TensorProxy)]
    return []


def _close_comment(spans: list, end: int) -> tuple:
    """Return ``spans`` (made in order of their start) with each open comment span (end 0) closed
    at ``end``."""
    return tuple((a, e or end, k) for a, e, k in spans)


_DIFF_OPTIONS = PrintOptions(align=0)


def statement_line(b: BoundSymbol, depth: int = 0, opts: PrintOptions = _DIFF_OPTIONS) -> PrintedLine:
    """Return the line of ``b`` as :func:`print_lines` prints it (a subsymbol's commented out,
    ``depth`` > 0), without indentation and (default) without aligning its comment: what a diff
    shows for ``b``, followed by the diff's own note."""
    return _statement(b, opts, "", depth)


def _with_note(line: PrintedLine, extra: str, had_notes: bool, opts_align: int = 48) -> PrintedLine:
    """Return ``line`` with a caller's note comment appended (``PrintOptions.notes``)."""
    text = line.text if had_notes else line.text.ljust(opts_align)
    text += "  # "
    spans = list(line.spans)
    if not had_notes:
        spans.append((len(text) - 2, len(text) + len(extra), COMMENT))
    else:
        spans = [(a, len(text) + len(extra) if k == COMMENT and e == len(line.text) else e, k) for a, e, k in spans]
    spans.append((len(text), len(text) + len(extra), NOTE))
    return PrintedLine(text + extra, line.kind, line.uid, line.depth, _close_comment(spans, 0))


def _del_line(b: BoundSymbol, indent: str, depth: int) -> PrintedLine:
    return PrintedLine(indent + call_text(b), DEL, None, depth, ((len(indent), len(indent) + 3, KEYWORD),))


def _body_lines(b: BoundSymbol, opts: PrintOptions, indent: str, depth: int, memo: dict | None) -> list[PrintedLine]:
    """Return the statement line of ``b`` and its subsymbols' lines: everything but the source
    comment; memoised on what they depend on (a caller's note is added after the memo)."""
    lines = None
    if memo is not None:
        # The printed body depends only on these fields; passes that rebuild a symbol with
        # dataclasses.replace keep its args/kwargs/outputs/subsymbols objects, so the lines are
        # reused even for a new BoundSymbol (claim only sets the executor, decompose renames ...).
        key = (depth, b.sym, b.uid, id(b.args), id(b.kwargs), id(b.outputs), id(b.subsymbols),
               b.origin if opts.uids else None, b.executor)
        hit = memo.get(key)
        if hit is not None:
            lines = hit[1]
    if lines is None:
        lines = [_statement(b, opts, indent, depth, memo)]
        if depth < opts.subsymbol_depth and b.subsymbols:
            sub_indent = indent + "  "
            for s in b.subsymbols:
                if s.sym == "del":
                    lines.append(_del_line(s, sub_indent, depth + 1))
                else:
                    lines.extend(_body_lines(s, opts, sub_indent, depth + 1, memo))
        if memo is not None:
            memo[key] = (b, lines)  # b keeps the objects whose ids are in the key alive
    extra = opts.notes(b) if opts.notes is not None and depth == 0 and b.sym != "del" else None
    if extra:
        first = lines[0]
        lines = [_with_note(first, extra, any(k == COMMENT for _, _, k in first.spans), opts.align), *lines[1:]]
    return lines


def _symbol_lines(b: BoundSymbol, opts: PrintOptions, indent: str, depth: int, last_src: list,
                  memo: dict | None = None) -> list[PrintedLine]:
    if b.sym == "del":
        return [_del_line(b, indent, depth)]
    if opts.source and depth == 0 and b.source is not None:
        comment = _source_line(b, indent, last_src)
        if comment is not None:
            return [comment, *_body_lines(b, opts, indent, depth, memo)]
    return _body_lines(b, opts, indent, depth, memo)


def header_line(trace: Trace) -> str:
    """Return the ``# graph 0 · forward · after "decompose" (812.0 µs)`` header (times as every view
    writes them: :mod:`.units`)."""
    ms = trace.meta.get("duration_ms")
    took = f" ({format_ms(ms)})" if isinstance(ms, (int, float)) and not isinstance(ms, bool) else ""
    if trace.meta.get("from_cache") is True:  # replayed from the persistent compile cache
        took = " (from cache)"
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


def print_lines(trace: Trace, opts: PrintOptions = PrintOptions(), memo: dict | None = None) -> list[PrintedLine]:
    """Return ``trace`` as structured :class:`PrintedLine` s: the header, the ``def`` (wrapped),
    the inputs' metadata comment, per symbol its source comment (when the source changes), its
    statement and its subsymbols, and the return.

    ``memo`` (optional, one dict per ``opts``, e.g. kept across the passes of a chain) caches each
    symbol's lines; traces are immutable, so a symbol a pass kept prints from the cache."""
    lines = []
    if opts.header:
        head = header_line(trace)
        lines.append(PrintedLine(head, HEADER, None, 0, ((0, len(head), COMMENT),)))
    for i, text in enumerate(signature_lines(trace, opts.width)):
        lines.append(PrintedLine(text, DEF, None, 0, ((0, 3, KEYWORD),) if i == 0 else ()))
    if opts.shapes and trace.inputs:
        for text in inputs_comment_lines(trace, opts.width):
            lines.append(PrintedLine(text, META, None, 0, _meta_spans(text)))
    last_src = [None]
    for b in trace.symbols:
        lines.extend(_symbol_lines(b, opts, "  ", 0, last_src, memo))
    outs = ", ".join(format_value(o) for o in trace.outputs)
    lines.append(PrintedLine(f"  return ({outs}{',' if len(trace.outputs) == 1 else ''})", RETURN, None, 0,
                             ((2, 8, KEYWORD),)))
    return lines


def _meta_spans(text: str) -> tuple:
    """Return the spans of an inputs comment line: the comment, and each ``name: type`` item's type."""
    spans = [(text.index("#"), len(text), COMMENT)]
    pos = text.index("#") + 2
    while True:
        colon = text.find(": ", pos)
        if colon < 0:
            break
        start = colon + 2
        end = text.find("  ", start)
        end = len(text) if end < 0 else end
        typ = text[start:end]
        cut = typ.find(" (")  # an FX name after the type: ``(primals_3)``
        spans.append((start, start + (cut if cut >= 0 else len(typ)), TYPE))
        pos = end
    return tuple(spans)


def print_trace(trace: Trace, opts: PrintOptions = PrintOptions(), memo: dict | None = None) -> str:
    """Return ``trace`` as Python source text (a ``def`` named after the chain).

    ``memo`` (optional, one dict per ``opts``, e.g. kept across the passes of a chain) caches each
    symbol's printed lines; traces are immutable, so a symbol a pass kept prints from the cache."""
    return "\n".join(line.text for line in print_lines(trace, opts, memo)) + "\n"
