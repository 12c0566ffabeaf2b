"""The stored texts the reader hands out whole: a pass's trace JSON and printed trace, a kernel's
code and region IR, each counted against the recording's budgets (:mod:`.budgets`) first.

A pass that changed nothing shares the texts of the pass before it (``symbols_from``); from schema 4
a text may be a delta against an earlier pass of its chain (:mod:`.pass_deltas`); in a packed rank
file it may live in the group store. :func:`pass_row` resolves all of that, and counts the objects
the trace JSON would build against the recording's budget (:mod:`.budgets`) before any caller
parses it: 0.5 MB of zlib can hold 60 million ``{"a":[]}`` objects.
"""
from __future__ import annotations

from .budgets import MiB, TooLarge, check_json_objects, count_expanded, object_budget, size_mib
from .errors import RecordingError
from .model import KernelSource, PassRef, UnknownItem
from .pass_deltas import resolve_pass_texts
from .typed import row_checker

_CHECK_PASS_ROW = row_checker("passes", ("name", "symbols_from", "meta"), ("text", "nat", "text?"))


def json_budget(rec) -> int:
    """Return how many JSON objects a pass trace of ``rec`` may build, sized from the symbol rows
    the recording holds (:func:`.budgets.object_budget`); counted once per recording."""
    n = getattr(rec, "_n_symbol_rows", None)
    if n is None:
        store = rec.store
        table = "symbol_rows" if store.has_table("symbol_rows") else "symbols"
        n = store.rows(f"SELECT COUNT(*) FROM {table}")[0][0] if store.has_table(table) else 0
        n = n if isinstance(n, int) else 0
        rec._n_symbol_rows = n
    return object_budget(n)


def pass_row(rec, ref: PassRef, want: str = "both") -> tuple:
    """Return (name, symbols_from, trace_json, printed, meta) of one pass as texts, following a
    shared pass to the pass that holds its JSON and text; ``want`` "json" or "printed" leaves
    the other text of a delta-stored pass (schema 4) unbuilt (None)."""
    graph, chain, index = ref.graph, ref.chain, ref.index
    what = f"graph {graph} {chain} pass {index}"
    store = rec.store
    delta_col = ", delta_base" if rec.schema_version >= 4 else ", NULL"
    with rec.snapshot():
        rows = store.rows(f"SELECT name, symbols_from, trace_json, printed, meta{delta_col} FROM passes"
                          " WHERE graph_id=? AND chain=? AND idx=?", (graph, chain, index))
        if not rows:
            raise UnknownItem(f"graph {graph} {chain} has no pass {index}")
        name, held, trace_json, printed, meta, delta = rows[0]
        _CHECK_PASS_ROW([(name, held, meta)], rec.path)
        rebuild = False
        if trace_json is None or printed is None:
            src = store.rows(f"SELECT trace_json, printed{delta_col} FROM passes WHERE graph_id=? AND chain=?"
                             " AND idx=?", (graph, chain, held))
            if not src or held == index or src[0][0] is None or src[0][1] is None:
                raise RecordingError(f"{rec.path} is corrupted ({what} shares a trace that is missing).")
            trace_json, printed, delta = src[0]
            rebuild = True
        if delta is not None:  # schema 4: a delta against an earlier pass of the chain
            trace_json, printed = resolve_pass_texts(store, graph, chain, held, delta, trace_json, printed, what,
                                                     want, rec._texts)
        else:
            rebuild = rebuild or store.is_reference(trace_json) or store.is_reference(printed)
            trace_json, printed = store.pass_texts(trace_json, printed, meta, what)
        if rebuild and printed is not None and printed.startswith("# graph "):
            from thundervis.compiler.ir import Trace
            from thundervis.compiler.printer import header_line
            header = header_line(Trace(name=chain, inputs=(), symbols=(), outputs=(), chain=chain,
                                       graph=graph, pass_name=name, meta=rec._json(meta, {}, "passes.meta")))
            printed = header + "\n" + printed.split("\n", 1)[1] if "\n" in printed else header
    if trace_json is not None:  # what json.loads would build, counted before anyone parses it
        check_json_objects(trace_json, json_budget(rec), f"the trace of {what}", rec.path)
    return name, held, trace_json, printed, meta


# A kernel's generated code per fused op, and the floor and ceiling of what one kernel may hold.
CODE_PER_MEMBER = 256 << 10
MIN_CODE = 4 * MiB
MAX_CODE = 64 * MiB


def _bounded_text(store, value, what: str, cap: int):
    """Return the text a text column holds (see the store's ``text()``), measured while streaming
    before it is built: :class:`TooLarge` past ``cap`` bytes."""
    if isinstance(value, bytes) and not store.is_reference(value):
        _, size = count_expanded(value, b"\n", 0, cap)
        if size > cap:
            raise TooLarge(store.path, what, size, cap)
    text = store.text(value, what)
    if text is not None and len(text) > cap:
        raise TooLarge(store.path, what, len(text))
    return text


def kernel_texts(rec, kid: int, name: str, language, code, trace_json, n_members) -> KernelSource:
    """Return the :class:`KernelSource` of a kernel row: its code, budgeted from its member count
    (over budget it reads as a one-line comment saying "too large to show"), and its region IR,
    budgeted like a pass trace (over budget: :class:`TooLarge`, nothing can be rebuilt from it)."""
    members = n_members if isinstance(n_members, int) and n_members > 0 else 1
    cap = min(MAX_CODE, max(MIN_CODE, CODE_PER_MEMBER * members))
    try:
        code_text = _bounded_text(rec.store, code, f"code of kernel {name}", cap)
    except TooLarge as e:
        code_text = f"# the generated code is too large to show ({size_mib(e.size)})"
    ir_what = f"region IR of kernel {name}"
    ir = _bounded_text(rec.store, trace_json, ir_what, MAX_CODE)
    if ir is not None:
        check_json_objects(ir, json_budget(rec), ir_what, rec.path)
    return KernelSource(kid, name, language, code_text, ir)
