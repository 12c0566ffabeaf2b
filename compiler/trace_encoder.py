"""The trace JSON encoder: a :class:`~.ir.Trace` written as compact JSON text (the format, and how
it is read back and checked, is :mod:`.serialize`'s docstring). :class:`TraceEncoder` is the one
encoder; :func:`trace_to_json` and :func:`trace_to_dict` are its one-off forms. Plain data only, and
importable without torch."""
from __future__ import annotations

import json
import math
from typing import Any

from .ir import BoundSymbol, SourceInfo, Trace, TensorProxy
from .values import constant_kind, dtype_name

# The format written; :data:`.serialize.READABLE_FORMATS` lists those read.
FORMAT_VERSION = 2


def _enc(v, proxies: dict) -> Any:
    if isinstance(v, TensorProxy):
        proxies.setdefault(v.name, v)
        return {"P": v.name}
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"F": repr(v)}
    if isinstance(v, tuple):
        return {"T": [_enc(x, proxies) for x in v]}
    if isinstance(v, list):
        return {"L": [_enc(x, proxies) for x in v]}
    if isinstance(v, dict):
        return {"K": {k: _enc(x, proxies) for k, x in v.items()}}
    kind = constant_kind(v)
    if kind == "dtype":
        return {"D": dtype_name(v)}
    if kind == "device":
        return {"V": str(v)}
    if kind == "layout":
        return {"Y": str(v).removeprefix("torch.")}
    if kind == "memory_format":
        return {"M": str(v).removeprefix("torch.")}
    if isinstance(v, slice):
        return {"S": [_enc(v.start, proxies), _enc(v.stop, proxies), _enc(v.step, proxies)]}
    if v is Ellipsis:
        return {"E": 1}
    raise TypeError(f"cannot serialize value of type {type(v).__name__}")


def _proxy_json(p: TensorProxy) -> dict:
    return {"name": p.name, "shape": list(p.shape), "dtype": p.dtype, "device": p.device,
            "strides": list(p.strides) if p.strides is not None else None}


def _source_json(s: SourceInfo | None):
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "code": s.code, "module": s.module, "function": s.function}


class TraceEncoder:
    """The trace JSON encoder (the only one): :meth:`to_json` writes a trace as compact JSON text,
    memoising the text of every symbol, argument structure, source and proxy by object identity,
    per (graph, chain). Traces are immutable and passes return the symbols they keep as the same
    objects (and rebuild the ones they change with ``dataclasses.replace``, which keeps args,
    outputs and subsymbols), so across the passes of a chain most pieces are encoded once. Each memo
    entry keeps its object alive, so an id is never reused while its entry exists; :meth:`forget`
    drops a chain that is done. Values the direct text paths do not cover go through ``_enc``."""

    def __init__(self):
        # (graph, chain) -> {"sym"|"val"|"proxy": {id: (obj, ...)}}
        self._cache: dict[tuple, dict] = {}

    def _chain_cache(self, trace: Trace) -> dict:
        key = (trace.graph, trace.chain)
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = {"sym": {}, "val": {}, "proxy": {}}
        return c

    def forget(self, graph: int, chain: str) -> None:
        """Drop the memo of a chain that finished."""
        self._cache.pop((graph, chain), None)

    def to_json(self, trace: Trace) -> str:
        """Return ``trace`` as JSON text (see the module docstring for the format)."""
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
            ',"fx_names":' + _dumps(dict(trace.fx_names)) if trace.fx_names else "", "}"))

    def _value(self, v, cache: dict) -> tuple:
        """Return ``(v, json text, [proxies in encounter order])`` for an argument structure."""
        hit = cache.get(id(v))
        if hit is None or hit[0] is not v:
            local: dict = {}
            hit = cache[id(v)] = (v, _value_text(v, local), list(local.values()))
        return hit

    def _symbol(self, b: BoundSymbol, c: dict) -> tuple:
        """Return ``(b, json text, [proxies])`` for one bound symbol and its subsymbols."""
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
            parts += [',"origin":', _str_list(b.origin)]
        if b.source is not None:
            parts += [',"source":', self._source(b.source, vals)]
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
    def _source(s: SourceInfo, cache: dict) -> str:
        hit = cache.get(id(s))
        if hit is None or hit[0] is not s:
            if all(type(x) is str for x in (s.file, s.code, s.module, s.function)) and type(s.line) is int:
                text = "".join(('{"file":', _str(s.file), ',"line":', int.__repr__(s.line), ',"code":',
                                _str(s.code), ',"module":', _str(s.module), ',"function":', _str(s.function), "}"))
            else:
                text = _dumps(_source_json(s))
            hit = cache[id(s)] = (s, text, [])
        return hit[1]


_dumps = json.JSONEncoder(separators=(",", ":")).encode  # == json.dumps(v, separators=(",", ":"))
_str = json.encoder.encode_basestring_ascii  # what that encoder does with a str


def _scalar(v) -> str:
    """Return ``_dumps(v)`` for a field value (usually a str or an int)."""
    t = type(v)
    return _str(v) if t is str else int.__repr__(v) if t is int else _dumps(v)


def _str_list(items) -> str:
    """Return ``_dumps(list(items))`` for a sequence of str."""
    if all(type(x) is str for x in items):
        return "[" + ",".join([_str(x) for x in items]) + "]"
    return _dumps(list(items))


def _ints_text(items) -> str:
    """Return ``_dumps(list(items))`` for a sequence of ints."""
    if all(type(x) is int for x in items):
        return "[" + ",".join([int.__repr__(x) for x in items]) + "]"
    return _dumps(list(items))


def _proxy_text(p: TensorProxy) -> str:
    """Return ``_dumps(_proxy_json(p))``."""
    if type(p.dtype) is not str or type(p.device) is not str or type(p.name) is not str:
        return _dumps(_proxy_json(p))
    strides = "null" if p.strides is None else _ints_text(p.strides)
    return "".join(('{"name":', _str(p.name), ',"shape":', _ints_text(p.shape), ',"dtype":', _str(p.dtype),
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


def trace_to_json(trace: Trace) -> str:
    """Return ``trace`` as a JSON string (a one-off :class:`TraceEncoder`; a caller encoding many
    passes of a chain keeps one encoder)."""
    return TraceEncoder().to_json(trace)


def trace_to_dict(trace: Trace) -> dict:
    """Return ``trace`` as the JSON-ready dict that :func:`trace_to_json` writes as text."""
    return json.loads(trace_to_json(trace))
