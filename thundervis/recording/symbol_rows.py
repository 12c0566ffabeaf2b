"""The symbol rows of a recording: stored rows, and rows derived in memory for a live or killed run.

The writer indexes each pass's symbols into the ``symbols`` table when the run ends; a pass of a
run still going (or killed) holds its trace JSON but no rows yet. :class:`SymbolIndex` (held by a
:class:`~.reader.Recording`, which it is given) answers symbol queries from the stored rows plus
rows derived from those passes' traces (cached in memory: the file stays untouched) and expands the
rows that unchanged passes share. Every row read is checked for its column types (:mod:`.typed`).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Callable, Optional

from .errors import RecordingError
from .model import Symbol
from .pass_deltas import decode_ids
from .pass_refs import PassLike, _pass_key
from .typed import load_json, row_checker

_SYMBOL_COLUMNS = ("graph_id, chain, pass_idx, position, uid, parent, sym, origin, file, line, code, module,"
                   " function, seq_nr, aten, executor, note")
# Schema 3 keeps file, code, module and function once per distinct location (symbol_sources).
_SHARED_SOURCE_SELECT = (
    "SELECT s.graph_id, s.chain, s.pass_idx, s.position, s.uid, s.parent, s.sym, s.origin,"
    " COALESCE(s.file, ss.file), s.line, COALESCE(s.code, ss.code), COALESCE(s.module, ss.module),"
    " COALESCE(s.function, ss.function), s.seq_nr, s.aten, s.executor, s.note"
    " FROM symbols s LEFT JOIN symbol_sources ss ON ss.id = s.source_id")
_CHECK_SYMBOLS = row_checker("symbols", _SYMBOL_COLUMNS.split(", "),
                             ("int", "text", "nat", "nat", "text", "text?", "text", "text?", "text?", "int?",
                              "text?", "text?", "text?", "int?", "text?", "text?", "text?"))
# Schema 4: symbol rows stored once per distinct content, listed per pass (pass_symbols).
_CONTENT_SELECT = ("SELECT r.id, r.uid, r.parent, r.sym, r.origin, ss.file, r.line, ss.code, ss.module, ss.function,"
                   " r.seq_nr, r.aten, r.executor, r.note FROM symbol_rows r LEFT JOIN symbol_sources ss"
                   " ON ss.id = r.source_id")
_CHECK_CONTENT = row_checker("symbol_rows", ("id", "uid", "parent", "sym", "origin", "file", "line", "code", "module",
                                             "function", "seq_nr", "aten", "executor", "note"),
                             ("int", "text", "text?", "text", "text", "text?", "int?", "text?", "text?", "text?",
                              "int?", "text?", "text?", "text?"))
_CHECK_PASS_LIST = row_checker("pass_symbols", ("graph_id", "chain", "pass_idx"), ("int", "text", "nat"))
_CHECK_UNINDEXED = row_checker("passes", ("graph_id", "chain", "idx"), ("int", "text", "nat"))
_CHECK_SHARED = row_checker("passes", ("graph_id", "chain", "idx", "symbols_from"), ("int", "text", "nat", "nat"))


@dataclass(frozen=True)
class SymbolRule:
    """Which symbols of a pass to read: ``where`` (SQL over a row's own columns ``parent``, ``sym``,
    ``executor``, ``note``; the same in either schema), its ``params``, and ``keep``, the same test
    in Python for rows derived in memory from a live or killed run's traces."""

    where: str
    params: tuple
    keep: Callable[[Symbol], bool]


# The ops a compiled chain leaves to torch, with the compiler's note saying why.
TORCH_NOTED = SymbolRule(
    "parent IS NULL AND executor = 'torch' AND note IS NOT NULL AND note != '' AND sym != 'del'", (),
    lambda s: s.parent is None and s.executor == "torch" and bool(s.note) and s.sym != "del")


def top_level_in_namespaces(namespaces) -> SymbolRule:
    """Return the rule selecting the top-level symbols whose name is ``<namespace>.<rest>`` for one
    of ``namespaces`` (e.g. the collectives' ``_c10d_functional``)."""
    names = tuple(sorted(namespaces))
    sql = " OR ".join("(substr(sym, 1, ?) = ? AND length(sym) > ?)" for _ in names)
    params = tuple(v for ns in names for v in (len(ns) + 1, ns + ".", len(ns) + 1))

    def keep(s):
        ns, dot, rest = s.sym.partition(".")
        return s.parent is None and bool(dot and rest) and ns in names
    return SymbolRule(f"parent IS NULL AND ({sql})", params, keep)


_PASS_CACHE = 64  # passes whose symbols a SymbolIndex keeps


def _at_pass(s: Symbol, index: int) -> Symbol:
    """``s`` as a symbol of pass ``index`` (a pass sharing the rows of the pass that holds them)."""
    return Symbol(s.graph, s.chain, index, s.position, s.uid, s.parent, s.sym, s.origin, s.source, s.seq_nr,
                  s.aten, s.executor, s.note)


class SymbolIndex:
    """The symbol rows of one recording ``rec`` (a :class:`~.reader.Recording`: its store, its
    run's status and its pass traces)."""

    def __init__(self, rec):
        self.rec = rec
        self.store = rec.store
        self._lock = threading.Lock()
        # Symbol rows derived from the trace JSON of passes the writer has not indexed yet (a live
        # or killed run): (graph, chain, pass) -> tuple[Symbol]. Kept in memory: the file stays
        # untouched and every thread sees the same rows.
        self._derived: dict[tuple, tuple[Symbol, ...]] = {}
        self._rows_complete = False
        self._pass_cache: dict[tuple, tuple[Symbol, ...]] = {}  # (graph, chain, pass) -> its symbols
        self._n_rows: Optional[int] = None  # symbol_rows in the file (sizes the list budget)

    def _shared_passes(self, graph: Optional[int] = None) -> dict[tuple, list[int]]:
        """Map (graph, chain, pass holding rows) -> the other passes that share those rows."""
        where, params = ("AND graph_id=?", (graph,)) if graph is not None else ("", ())
        out: dict[tuple, list[int]] = {}
        for g, c, i, src in _CHECK_SHARED(self.store.rows(
                f"SELECT graph_id, chain, idx, symbols_from FROM passes WHERE symbols_from != idx {where}", params),
                self.store.path):
            out.setdefault((g, c, src), []).append(i)
        return out

    @property
    def _compact(self) -> bool:
        """True for schema 4 (content-addressed rows listed per pass), False for one row per symbol."""
        return self.store.has_table("pass_symbols")

    def _list_budget(self) -> int:
        """Return how many entries one pass's symbol list may have: its entries are distinct
        symbol rows, so twice the rows the recording holds (and a floor) is generous."""
        if self._n_rows is None:
            n = self.store.rows("SELECT COUNT(*) FROM symbol_rows")[0][0]
            self._n_rows = n if isinstance(n, int) else 0
        return max(10_000, 2 * self._n_rows)

    def _content_rows(self, where: str, params: tuple) -> dict[int, tuple]:
        """Return {row id: checked symbol_rows row (with its source location)} matching ``where``."""
        rows = _CHECK_CONTENT(self.store.rows(f"{_CONTENT_SELECT} WHERE {where}", params), self.store.path)
        return {r[0]: r for r in rows}

    def _compact_symbols(self, pass_where: str, pass_params: tuple, row_where: Optional[str],
                         row_params: tuple) -> list[Symbol]:
        """The symbols of the listed passes matching ``pass_where`` (SQL over pass_symbols) whose
        row matches ``row_where`` (SQL over symbol_rows; None: every row of those passes)."""
        lists = self.store.rows(f"SELECT graph_id, chain, pass_idx, rows FROM pass_symbols WHERE {pass_where}",
                                pass_params)
        _CHECK_PASS_LIST([r[:3] for r in lists], self.store.path)
        limit = self._list_budget() if lists else 0
        decoded = [(g, c, i, decode_ids(blob, f"the symbol list of graph {g} {c} pass {i}", self.store.path, limit))
                   for g, c, i, blob in lists]
        if row_where is None:
            wanted = sorted({rid for *_, ids in decoded for rid in ids})
            rows = {}
            for k in range(0, len(wanted), 20_000):
                rows.update(self._content_rows("r.id IN (SELECT value FROM json_each(?))",
                                               (json.dumps(wanted[k:k + 20_000]),)))
            missing = len(wanted) - len(rows)
            if missing:
                raise RecordingError(f"{self.store.path} is corrupted (its pass symbol lists name {missing} "
                                     "symbol rows that are missing).")
        else:
            rows = self._content_rows(row_where, row_params)
        parts = {}  # row id -> the Symbol fields after (graph, chain, pass, position), parsed once
        sources: dict = {}  # rows share source locations: one SourceInfo each
        for rid, r in rows.items():
            src = None
            if r[5] is not None or r[8]:
                key = r[5:10]
                src = sources.get(key)
                if src is None:
                    from thundervis.compiler.ir import SourceInfo
                    src = sources[key] = SourceInfo(file=r[5] or "", line=r[6] or 0, code=r[7] or "",
                                                    module=r[8] or "", function=r[9] or "")
            parts[rid] = (r[1], r[2], r[3], self._origin(r[4]), src, r[10], r[11], r[12], r[13])
        out = []
        for g, c, i, ids in decoded:
            for position, rid in enumerate(ids):
                f = parts.get(rid)
                if f is not None:
                    out.append(Symbol(g, c, i, position, *f))
        return out

    def _unindexed_passes(self) -> list[tuple]:
        """Return (graph, chain, pass) of every pass holding its own trace but no ``symbols`` rows
        (the writer indexes them when the run ends; a live or killed run lacks some)."""
        if self._rows_complete:
            return []
        table, pass_col = ("pass_symbols", "pass_idx") if self._compact else ("symbols", "pass_idx")
        missing = _CHECK_UNINDEXED(self.store.rows(
            "SELECT graph_id, chain, idx FROM passes p WHERE symbols_from = idx AND n_symbols > 0 AND NOT EXISTS"
            f" (SELECT 1 FROM {table} s WHERE s.graph_id = p.graph_id AND s.chain = p.chain AND s.{pass_col} = p.idx)"
            " ORDER BY graph_id, chain, idx"), self.store.path)
        if not missing and self.rec.run().status not in ("running", "killed"):
            self._rows_complete = True
        return missing

    def _derived_rows(self, key: tuple) -> tuple[Symbol, ...]:
        """The symbol rows of one unindexed pass, derived from its trace JSON (cached)."""
        with self._lock:
            hit = self._derived.get(key)
        if hit is not None:
            return hit
        from .trace_text import symbol_rows
        g, c, i = key
        rows = tuple(self._symbol_from_row(r) for r in symbol_rows(g, c, i, self.rec.pass_trace(g, c, i)))
        with self._lock:
            self._derived[key] = rows
        return rows

    def _symbol_from_row(self, r) -> Symbol:
        src = None
        if r[8] is not None or r[11]:
            from thundervis.compiler.ir import SourceInfo
            src = SourceInfo(file=r[8] or "", line=r[9] or 0, code=r[10] or "", module=r[11] or "",
                             function=r[12] or "")
        return Symbol(r[0], r[1], r[2], r[3], r[4], r[5], r[6], self._origin(r[7]), src, r[13], r[14], r[15], r[16])

    def _origin(self, text) -> tuple[str, ...]:
        """A stored origin (JSON list of uids) as a tuple; the writer's plain form (``["f1", "f2"]``,
        nothing escaped) without the JSON parser, anything else through :func:`load_json`."""
        if (text.__class__ is str and len(text) >= 4 and text.startswith('["') and text.endswith('"]')
                and "\\" not in text and text.isprintable()):
            parts = text[2:-2].split('", "')
            if not any('"' in p for p in parts):
                return tuple(parts)
        if text == "[]":
            return ()
        return tuple(str(o) for o in load_json(text, "a symbol's origin", self.store.path, list, []))

    def _symbols(self, where: str, params: tuple, keep, graph: Optional[int] = None,
                 expand: bool = True, compact: tuple = ("1", (), None, ())) -> list[Symbol]:
        """Return the symbols matching ``where`` (SQL over the stored rows) and ``keep`` (the same
        test in Python, for rows derived in memory); with ``expand``, the rows shared by unchanged
        passes repeated for each of them; ordered by graph, chain, pass and position. ``compact``
        is the same query for schema 4: (SQL over pass_symbols, params, SQL over symbol_rows or
        None for all rows, params)."""
        with self.store.snapshot():
            if self._compact:
                out = self._compact_symbols(*compact)
            else:
                select = (_SHARED_SOURCE_SELECT if self.store.has_table("symbol_sources")
                          else f"SELECT {_SYMBOL_COLUMNS} FROM symbols")
                out = [self._symbol_from_row(r) for r in _CHECK_SYMBOLS(self.store.rows(
                    f"{select} WHERE {where}", params), self.store.path)]
            for key in self._unindexed_passes():
                out.extend(s for s in self._derived_rows(key) if keep(s))
            shared = self._shared_passes(graph) if expand else {}
        if shared:
            out.extend(_at_pass(s, i) for s in list(out) for i in shared.get((s.graph, s.chain, s.pass_index), ()))
        out.sort(key=lambda s: (s.graph, s.chain, s.pass_index, s.position))
        return out

    def symbols(self, ref: PassLike, chain: Optional[str] = None, index: Optional[int] = None) -> list[Symbol]:
        """Return the symbols of one pass (top level and subsymbols, in walk order)."""
        ref = _pass_key(ref, chain, index)
        key = (ref.graph, ref.chain, ref.index)
        with self._lock:  # a pass's symbols never change once it has any (ls and views ask twice)
            hit = self._pass_cache.get(key)
        if hit is not None:
            return list(hit)
        found = self._pass_symbols(ref, None, (), lambda s: True)
        if found:
            with self._lock:
                if len(self._pass_cache) >= _PASS_CACHE:
                    self._pass_cache.pop(next(iter(self._pass_cache)))
                self._pass_cache[key] = tuple(found)
        return found

    def matching_symbols(self, ref: PassLike, rule: SymbolRule) -> list[Symbol]:
        """Return the symbols of one pass that ``rule`` selects, in walk order; selected in SQL, so
        a big pass costs only its few matching rows."""
        return self._pass_symbols(_pass_key(ref, None, None), rule.where, rule.params, rule.keep)

    def _pass_symbols(self, ref, where: Optional[str], params: tuple, keep) -> list[Symbol]:
        """The symbols of pass ``ref`` (a pass sharing another's rows reads that pass's) whose row
        matches ``where`` (SQL over the row's own columns, either schema; None: all) and ``keep``
        (the same test in Python, for rows derived in memory)."""
        rows = self.store.rows("SELECT symbols_from FROM passes WHERE graph_id=? AND chain=? AND idx=?",
                               (ref.graph, ref.chain, ref.index))
        held = rows[0][0] if rows and rows[0][0].__class__ is int else ref.index
        g, c = ref.graph, ref.chain
        found = self._symbols("graph_id=? AND chain=? AND pass_idx=?" + (f" AND ({where})" if where else ""),
                              (g, c, held, *params),
                              lambda s: s.graph == g and s.chain == c and s.pass_index == held and keep(s),
                              expand=False,
                              compact=("graph_id=? AND chain=? AND pass_idx=?", (g, c, held), where, params))
        if held != ref.index:
            found = [_at_pass(s, ref.index) for s in found]
        return found

    def chain_symbols(self, graph: int, chain: str) -> list[Symbol]:
        """Return the symbols of every pass of one chain, by pass then position."""
        return self._symbols("graph_id=? AND chain=?", (graph, chain),
                             lambda s: s.graph == graph and s.chain == chain, graph,
                             compact=("graph_id=? AND chain=?", (graph, chain), None, ()))

    def symbols_at_line(self, line: int, graph: Optional[int] = None) -> list[Symbol]:
        """Return every symbol (any pass) whose source line is ``line``, optionally in one graph."""
        def at(s):
            return s.source is not None and s.source.line == line and (graph is None or s.graph == graph)
        if graph is None:
            return self._symbols("line=?", (line,), at, compact=("1", (), "r.line=?", (line,)))
        return self._symbols("line=? AND graph_id=?", (line, graph), at, graph,
                             compact=("graph_id=?", (graph,), "r.line=?", (line,)))

    def symbols_with_uid(self, graph: int, uid: str) -> list[Symbol]:
        """Return every stored occurrence of ``uid`` in ``graph`` (one per pass it survives)."""
        return self._symbols("graph_id=? AND uid=?", (graph, uid),
                             lambda s: s.graph == graph and s.uid == uid, graph,
                             compact=("graph_id=?", (graph,), "r.uid=?", (uid,)))
