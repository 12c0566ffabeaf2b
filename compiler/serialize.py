"""JSON serialization of traces, both ways: plain data only, nothing is unpickled or executed.

Values are tagged objects: ``{"P": name}`` a proxy reference, ``{"T": [...]}`` a tuple,
``{"L": [...]}`` a list, ``{"D": "float32"}`` a dtype, ``{"V": "cpu"}`` a device, ``{"F": "inf"}``
a non-finite float, ``{"S": [start, stop, step]}`` a slice, ``{"E": 1}`` Ellipsis, ``{"Y": ...}`` a
layout and ``{"M": ...}`` a memory format. Loading validates every field and raises
:class:`TraceFormatError` on anything malformed.

Importable without torch: in a process that has not imported torch, loaded dtype/device/layout/
memory-format constants are :class:`~thundervis.compiler.values.TorchConstant` stand-ins (they
print and re-encode the same); where torch is imported they are the torch objects.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from .ir import BoundSymbol, SourceInfo, Trace, TensorProxy
from .values import constant_kind, dtype_name, is_dtype_name, is_valid_name, torch_constant

FORMAT_VERSION = 1


_SYMBOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_UID = re.compile(r"[A-Za-z0-9_]{1,32}")


class TraceFormatError(ValueError):
    """The JSON is not a valid serialized trace."""


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


def _bsym_json(b: BoundSymbol, proxies: dict) -> dict:
    d = {"sym": b.sym, "uid": b.uid, "args": _enc(b.args, proxies), "kwargs": _enc(b.kwargs, proxies),
         "outputs": _enc(b.outputs, proxies)}
    if b.origin:
        d["origin"] = list(b.origin)
    if b.source is not None:
        d["source"] = _source_json(b.source)
    for k in ("seq_nr", "aten", "executor", "note"):
        if getattr(b, k) is not None:
            d[k] = getattr(b, k)
    if b.subsymbols:
        d["subsymbols"] = [_bsym_json(s, proxies) for s in b.subsymbols]
    return d


def trace_to_dict(trace: Trace) -> dict:
    """Return a JSON-ready dict for ``trace``."""
    proxies: dict[str, TensorProxy] = {}
    for p in trace.inputs:
        proxies[p.name] = p
    symbols = [_bsym_json(b, proxies) for b in trace.symbols]
    outputs = _enc(trace.outputs, proxies)
    return {
        "format": FORMAT_VERSION, "name": trace.name, "chain": trace.chain, "graph": trace.graph,
        "pass": trace.pass_name, "next_uid": trace.next_uid, "next_name": trace.next_name,
        "proxies": [_proxy_json(p) for p in proxies.values()],
        "inputs": [p.name for p in trace.inputs], "symbols": symbols, "outputs": outputs,
        "meta": {k: v for k, v in trace.meta.items() if isinstance(v, (int, float, str, bool))},
    }


def trace_to_json(trace: Trace) -> str:
    """Return ``trace`` as a JSON string."""
    return json.dumps(trace_to_dict(trace), separators=(",", ":"))


# ---------------------------------------------------------------------------------------- loading

def _need(cond: bool, what: str) -> None:
    if not cond:
        raise TraceFormatError(what)


def _int_list(v, what: str) -> tuple[int, ...]:
    _need(isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v), what)
    return tuple(v)


def _load_proxy(d) -> TensorProxy:
    _need(isinstance(d, dict), "proxy is not an object")
    name = d.get("name")
    _need(isinstance(name, str) and is_valid_name(name), f"bad proxy name {name!r}")
    shape = _int_list(d.get("shape"), f"bad shape for {name}")
    dtype = d.get("dtype")
    _need(isinstance(dtype, str), f"bad dtype for {name}")
    _need(is_dtype_name(dtype), f"unknown dtype {dtype!r}")
    device = d.get("device")
    _need(isinstance(device, str) and len(device) < 64, f"bad device for {name}")
    strides = d.get("strides")
    strides = None if strides is None else _int_list(strides, f"bad strides for {name}")
    return TensorProxy(name, shape, dtype, device, strides)


_CONSTANT_TAGS = {"D": "dtype", "V": "device", "Y": "layout", "M": "memory_format"}


def _dec(v, proxies: dict):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    _need(isinstance(v, dict) and len(v) == 1, f"bad value {str(v)[:60]}")
    (tag, x), = v.items()
    if tag == "P":
        _need(x in proxies, f"reference to unknown proxy {x!r}")
        return proxies[x]
    if tag == "T":
        _need(isinstance(x, list), "bad tuple")
        return tuple(_dec(y, proxies) for y in x)
    if tag == "L":
        _need(isinstance(x, list), "bad list")
        return [_dec(y, proxies) for y in x]
    if tag == "K":
        _need(isinstance(x, dict), "bad dict")
        return {str(k): _dec(y, proxies) for k, y in x.items()}
    if tag in _CONSTANT_TAGS:
        try:
            return torch_constant(_CONSTANT_TAGS[tag], x)
        except ValueError as e:
            raise TraceFormatError(str(e)) from None
    if tag == "F":
        _need(x in ("inf", "-inf", "nan"), f"bad float {x!r}")
        return float(x)
    if tag == "S":
        _need(isinstance(x, list) and len(x) == 3, "bad slice")
        return slice(*(_dec(y, proxies) for y in x))
    if tag == "E":
        return Ellipsis
    raise TraceFormatError(f"unknown value tag {tag!r}")


def _load_source(d):
    if d is None:
        return None
    _need(isinstance(d, dict), "bad source")
    line = d.get("line", 0)
    _need(isinstance(line, int), "bad source line")
    return SourceInfo(file=str(d.get("file", "")), line=line, code=str(d.get("code", "")),
                      module=str(d.get("module", "")), function=str(d.get("function", "")))


def _load_bsym(d, proxies) -> BoundSymbol:
    _need(isinstance(d, dict), "symbol is not an object")
    sym, uid = d.get("sym"), d.get("uid")
    _need(isinstance(sym, str) and isinstance(uid, str), "symbol without sym/uid")
    # Names end up in generated code (kernel names, callee names): only dotted identifiers pass.
    _need(_SYMBOL_NAME.fullmatch(sym) is not None, f"bad symbol name {sym[:60]!r}")
    _need(_UID.fullmatch(uid) is not None, f"bad uid {uid[:60]!r}")
    args = _dec(d.get("args", {"T": []}), proxies)
    kwargs = _dec(d.get("kwargs", {"K": {}}), proxies)
    _need(isinstance(args, tuple) and isinstance(kwargs, dict), f"bad arguments for {uid}")
    origin = d.get("origin", [])
    _need(isinstance(origin, list) and all(isinstance(o, str) for o in origin), f"bad origin for {uid}")
    seq_nr = d.get("seq_nr")
    _need(seq_nr is None or isinstance(seq_nr, int), f"bad seq_nr for {uid}")
    subs = d.get("subsymbols", [])
    _need(isinstance(subs, list), f"bad subsymbols for {uid}")
    opt = {k: d.get(k) for k in ("aten", "executor", "note")}
    for k, v in opt.items():
        _need(v is None or isinstance(v, str), f"bad {k} for {uid}")
    return BoundSymbol(sym=sym, args=args, kwargs=kwargs, outputs=_dec(d.get("outputs"), proxies),
                       uid=uid, origin=tuple(origin), source=_load_source(d.get("source")),
                       seq_nr=seq_nr, subsymbols=tuple(_load_bsym(s, proxies) for s in subs), **opt)


def trace_from_dict(d: dict) -> Trace:
    """Rebuild a Trace from :func:`trace_to_dict` output; raise :class:`TraceFormatError`."""
    _need(isinstance(d, dict), "trace is not an object")
    _need(d.get("format") == FORMAT_VERSION, f"unsupported trace format {d.get('format')!r}")
    proxies = {}
    for pd in d.get("proxies", []):
        p = _load_proxy(pd)
        proxies[p.name] = p
    inputs = d.get("inputs", [])
    _need(isinstance(inputs, list) and all(n in proxies for n in inputs), "bad inputs")
    syms = d.get("symbols", [])
    _need(isinstance(syms, list), "bad symbols")
    outputs = _dec(d.get("outputs", {"T": []}), proxies)
    _need(isinstance(outputs, tuple), "bad outputs")
    for k in ("graph", "next_uid", "next_name"):
        _need(isinstance(d.get(k, 0), int), f"bad {k}")
    meta = d.get("meta", {})
    _need(isinstance(meta, dict), "bad meta")
    return Trace(name=str(d.get("name", "")), inputs=tuple(proxies[n] for n in inputs),
                 symbols=tuple(_load_bsym(s, proxies) for s in syms), outputs=outputs,
                 chain=str(d.get("chain", "")), graph=d.get("graph", 0), pass_name=str(d.get("pass", "")),
                 next_uid=d.get("next_uid", 0), next_name=d.get("next_name", 0), meta=dict(meta))


def trace_from_json(text: str) -> Trace:
    """Rebuild a Trace from JSON text; raise :class:`TraceFormatError` on anything malformed."""
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise TraceFormatError(f"not JSON: {e}") from None
    return trace_from_dict(d)
