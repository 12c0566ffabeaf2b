"""The text a recording stores for each pass, cached across the passes of a chain.

:class:`TraceTextCache` produces exactly ``trace_to_json(trace)``, ``print_trace(trace)`` and the
``symbols`` rows of :func:`symbol_rows`, but reuses the text of every piece a pass did not change.
Traces are immutable and passes return the symbols they keep as the same objects (and rebuild the
ones they change with ``dataclasses.replace``, which keeps args, outputs and subsymbols), so most of
a chain's symbols are encoded once instead of once per pass. This is most of the recording's cost
during a compile. Tests check the output against the plain functions.
"""
from __future__ import annotations

import json

from thundervis.compiler.ir import TensorProxy, Trace
from thundervis.compiler.printer import print_trace
from thundervis.compiler.serialize import trace_to_json

try:  # the compiler's per-piece encoders: the fallback for values the fast paths do not cover
    from thundervis.compiler.serialize import FORMAT_VERSION, _enc, _proxy_json, _source_json
except ImportError:  # pragma: no cover - the compiler changed: encode whole traces
    _enc = None


class TraceTextCache:
    """``trace_to_json``, ``print_trace`` and the ``symbols`` rows of a trace, with the text of
    each piece cached by object identity across the passes of one chain: traces are immutable and
    passes return the symbols they do not change as the same objects (and rebuild the ones they do
    change with ``dataclasses.replace``, which keeps args, outputs and subsymbols), so most symbols
    are encoded once per chain instead of once per pass. The output equals ``trace_to_json`` and
    ``print_trace`` (tests check it). Each cache entry keeps the object it describes alive, so an
    id is never reused while its entry exists."""

    def __init__(self):
        # (graph, chain) -> {"sym"|"val"|"proxy"|"row": {id: (obj, ...)}, "print": printer memo}
        self._cache: dict[tuple, dict] = {}

    def _chain_cache(self, trace: Trace) -> dict:
        key = (trace.graph, trace.chain)
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = {"sym": {}, "val": {}, "proxy": {}, "row": {}, "print": {}}
        return c

    def print(self, trace: Trace) -> str:
        """Return ``print_trace(trace)``."""
        return print_trace(trace, memo=self._chain_cache(trace)["print"])

    def _value(self, v, cache: dict) -> tuple:
        """Return ``(v, json text, [proxies in encounter order])`` for an argument structure."""
        hit = cache.get(id(v))
        if hit is None or hit[0] is not v:
            local: dict = {}
            hit = cache[id(v)] = (v, _value_text(v, local), list(local.values()))
        return hit

    def _symbol(self, b, c: dict) -> tuple:
        """Return ``(b, json text, [proxies])``: the text of ``json.dumps(_bsym_json(b))``."""
        cache = c["sym"]
        hit = cache.get(id(b))
        if hit is not None and hit[0] is b:
            return hit
        vals = c["val"]
        args, kwargs, outputs = self._value(b.args, vals), self._value(b.kwargs, vals), self._value(b.outputs, vals)
        proxies = args[2] + kwargs[2] + outputs[2]
        parts = ['{"sym":', _scalar(b.sym), ',"uid":', _scalar(b.uid), ',"args":', args[1],
                 ',"kwargs":', kwargs[1], ',"outputs":', outputs[1]]
        if b.origin:
            parts += [',"origin":', _str_list(b.origin, ",")]
        if b.source is not None:
            parts += [',"source":', self._value_source(b.source, vals)]
        for k in ("seq_nr", "aten", "executor", "note"):
            v = getattr(b, k)
            if v is not None:
                parts += [f',"{k}":', _scalar(v)]
        if b.fusion:
            parts.append(',"fusion":true')
        if b.subsymbols:
            subs = [self._symbol(s, c) for s in b.subsymbols]
            parts += [',"subsymbols":[', ",".join(s[1] for s in subs), "]"]
            for s in subs:
                proxies += s[2]
        parts.append("}")
        hit = cache[id(b)] = (b, "".join(parts), proxies)
        return hit

    @staticmethod
    def _value_source(s, cache: dict) -> str:
        hit = cache.get(id(s))
        if hit is None or hit[0] is not s:
            if all(type(x) is str for x in (s.file, s.code, s.module, s.function)) and type(s.line) is int:
                text = "".join(('{"file":', _str(s.file), ',"line":', int.__repr__(s.line), ',"code":',
                                _str(s.code), ',"module":', _str(s.module), ',"function":', _str(s.function), "}"))
            else:
                text = _dumps(_source_json(s))
            hit = cache[id(s)] = (s, text, [])
        return hit[1]

    def to_json(self, trace: Trace) -> str:
        """Return ``trace`` as the same JSON text as ``trace_to_json``."""
        if _enc is None:
            return trace_to_json(trace)
        c = self._chain_cache(trace)
        proxies = {p.name: p for p in trace.inputs}
        symbols = []
        for b in trace.symbols:
            hit = self._symbol(b, c)
            for p in hit[2]:
                if p.name not in proxies:
                    proxies[p.name] = p
            symbols.append(hit[1])
        local = dict(proxies)
        outputs = _dumps(_enc(trace.outputs, local))
        pcache = c["proxy"]
        ptexts = []
        for p in local.values():
            hit = pcache.get(id(p))
            if hit is None or hit[0] is not p:
                hit = pcache[id(p)] = (p, _proxy_text(p))
            ptexts.append(hit[1])
        meta = {k: v for k, v in trace.meta.items() if isinstance(v, (int, float, str, bool))}
        return "".join((
            '{"format":', _dumps(FORMAT_VERSION), ',"name":', _dumps(trace.name),
            ',"chain":', _dumps(trace.chain), ',"graph":', _dumps(trace.graph),
            ',"pass":', _dumps(trace.pass_name), ',"next_uid":', _dumps(trace.next_uid),
            ',"next_name":', _dumps(trace.next_name), ',"proxies":[', ",".join(ptexts),
            '],"inputs":', _dumps([p.name for p in trace.inputs]), ',"symbols":[', ",".join(symbols),
            '],"outputs":', outputs, ',"meta":', _dumps(meta),
            ',"fx_names":' + _dumps(trace.fx_names) if trace.fx_names else "", "}"))

    def symbol_rows(self, graph: int, chain: str, index: int, trace: Trace) -> list[tuple]:
        """Return one ``symbols`` row per bound symbol of ``trace`` (subsymbols included, ``del``
        statements skipped: they carry no provenance), as :func:`symbol_rows` does."""
        cache = self._chain_cache(trace)["row"]
        rows = []
        for b in trace.symbols:
            if b.sym == "del":
                continue
            for tail in self._row_tails(b, None, cache):
                rows.append((graph, chain, index, len(rows)) + tail)
        return rows

    def _row_tails(self, b, parent, cache: dict) -> list[tuple]:
        """The rows of ``b`` and its subsymbols without their (graph, chain, pass, position)."""
        hit = cache.get(id(b))
        if hit is not None and hit[0] is b and hit[1] == parent:
            return hit[2]
        s = b.source
        tails = [(b.uid, parent, b.sym, _str_list(b.origin, ", "),
                  s.file if s else None, s.line if s else None, s.code if s else None,
                  s.module if s else None, s.function if s else None, b.seq_nr, b.aten,
                  b.executor, b.note)]
        for sub in b.subsymbols:
            if sub.sym != "del":
                tails.extend(self._row_tails(sub, b.uid, cache))
        cache[id(b)] = (b, parent, tails)
        return tails

    def forget(self, graph: int, chain: str) -> None:
        """Drop the cache of a chain that finished."""
        self._cache.pop((graph, chain), None)


_dumps = json.JSONEncoder(separators=(",", ":")).encode  # == json.dumps(v, separators=(",", ":"))
_str = json.encoder.encode_basestring_ascii  # what that encoder does with a str


def _scalar(v) -> str:
    """Return ``_dumps(v)`` for a field value (usually a str or an int)."""
    t = type(v)
    return _str(v) if t is str else int.__repr__(v) if t is int else _dumps(v)


def _str_list(items, sep: str) -> str:
    """Return ``json.dumps(list(items), separators=(sep, ":"))`` for a sequence of str."""
    if all(type(x) is str for x in items):
        return "[" + sep.join([_str(x) for x in items]) + "]"
    return json.dumps(list(items), separators=(sep, ":"))


def _int_list(items) -> str:
    """Return ``_dumps(list(items))`` for a sequence of ints."""
    if all(type(x) is int for x in items):
        return "[" + ",".join([int.__repr__(x) for x in items]) + "]"
    return _dumps(list(items))


def _proxy_text(p: TensorProxy) -> str:
    """Return ``_dumps(_proxy_json(p))``."""
    if type(p.dtype) is not str or type(p.device) is not str or type(p.name) is not str:
        return _dumps(_proxy_json(p))
    strides = "null" if p.strides is None else _int_list(p.strides)
    return "".join(('{"name":', _str(p.name), ',"shape":', _int_list(p.shape), ',"dtype":', _str(p.dtype),
                    ',"device":', _str(p.device), ',"strides":', strides, "}"))


def _value_text(v, proxies: dict) -> str:
    """Return ``_dumps(_enc(v, proxies))`` for an IR value, writing the common cases (proxies,
    ints, strings, tuples, lists, str-keyed dicts) directly instead of building the tagged dict
    first; anything else goes through ``_enc``. Exact types only: subclasses (bool, IntEnum ...)
    take the general path, so the text is always the same."""
    t = type(v)
    if t is TensorProxy:
        if v.name not in proxies:
            proxies[v.name] = v
        return '{"P":' + _str(v.name) + "}"
    if t is int:
        return int.__repr__(v)
    if t is str:
        return _str(v)
    if v is None:
        return "null"
    if t is tuple:
        return '{"T":[' + ",".join([_value_text(x, proxies) for x in v]) + "]}"
    if t is list:
        return '{"L":[' + ",".join([_value_text(x, proxies) for x in v]) + "]}"
    if t is dict and all(type(k) is str for k in v):
        return '{"K":{' + ",".join([_str(k) + ":" + _value_text(x, proxies) for k, x in v.items()]) + "}}"
    return _dumps(_enc(v, proxies))


def symbol_rows(graph: int, chain: str, index: int, trace: Trace):
    """Yield one ``symbols`` row per bound symbol of ``trace`` (subsymbols included, ``del``
    statements skipped: they carry no provenance)."""
    position = 0
    stack = [(b, None) for b in reversed(trace.symbols)]
    while stack:
        b, parent = stack.pop()
        if b.sym != "del":
            s = b.source
            yield (graph, chain, index, position, b.uid, parent, b.sym, json.dumps(list(b.origin)),
                   s.file if s else None, s.line if s else None, s.code if s else None,
                   s.module if s else None, s.function if s else None, b.seq_nr, b.aten,
                   b.executor, b.note)
            position += 1
            stack.extend((sub, b.uid) for sub in reversed(b.subsymbols))
