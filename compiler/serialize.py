"""JSON serialization of traces, both ways (writing is :mod:`.trace_encoder`, re-exported here;
reading and checking is this module): plain data only, nothing is unpickled or executed.

Loading checks the IR's grammar, whoever wrote the JSON: symbol names are ``del`` or dotted
identifiers, kwarg keys and proxy names identifiers, dtypes, layouts and memory formats come from
fixed tables and devices match ``cpu``/``cuda:N``-style spelling. What a loaded trace may *run* is
the registry's business (:func:`.registry.check_executable`), checked by :func:`executable_trace_from_dict`
before anything rebuilt from a recording generates code or runs.

Values are tagged objects: ``{"P": name}`` a proxy reference, ``{"T": [...]}`` a tuple,
``{"L": [...]}`` a list, ``{"D": "float32"}`` a dtype, ``{"V": "cpu"}`` a device, ``{"F": "inf"}``
a non-finite float, ``{"S": [start, stop, step]}`` a slice, ``{"E": 1}`` Ellipsis, ``{"Y": ...}`` a
layout and ``{"M": ...}`` a memory format. Loading validates every field and raises
:class:`TraceFormatError` on anything malformed.

Format 2 marks fusion symbols (``"fusion": true``) and keeps the FX names of renamed inputs
(``"fx_names"``). Format 1 (older recordings) is still read: its fusion symbols are recognised by the
kernel names recorded with the trace when the caller knows them, else by their shape (a top-level
symbol with subsymbols and an executor whose name is not an ATen or prims op).

Importable without torch: in a process that has not imported torch, loaded dtype/device/layout/
memory-format constants are :class:`~thundervis.compiler.values.TorchConstant` stand-ins (they
print and re-encode the same); where torch is imported they are the torch objects.
"""
from __future__ import annotations

import json
import re
from keyword import iskeyword

from .ir import BoundSymbol, KernelRecord, SourceInfo, SourceLine, Trace, TensorProxy
# the writing half (the format's one encoder), importable from here as the serializer's API
from .trace_encoder import FORMAT_VERSION, TraceEncoder, trace_to_dict, trace_to_json  # noqa: F401
from .trace_encoder import _proxy_json
from .values import DEVICE, is_dtype_name, is_valid_name, torch_constant

READABLE_FORMATS = (1, 2)


_SYMBOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_UID = re.compile(r"[A-Za-z0-9_]{1,32}")
# Keys of dict constants (an IR value kind no ATen schema takes; kept for torch-level calls).
_KEY = re.compile(r"[A-Za-z0-9_.]{1,100}")


class TraceFormatError(ValueError):
    """The JSON is not a valid serialized trace."""


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
    _need(isinstance(device, str) and DEVICE.fullmatch(device) is not None, f"bad device for {name}")
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
        _need(isinstance(x, dict) and all(_KEY.fullmatch(k) for k in x), "bad dict or keyword key")
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


def _legacy_fusion(d: dict, fusion_names) -> bool:
    """Whether a format-1 top-level symbol is a fusion: its name is one of the chain's recorded
    kernels (when known), else it has subsymbols and an executor and is not an ATen/prims op."""
    if fusion_names is not None:
        return d.get("sym") in fusion_names and bool(d.get("subsymbols"))
    sym = str(d.get("sym", ""))
    return bool(d.get("subsymbols")) and d.get("executor") is not None and not sym.startswith(("prims.", "aten."))


def _load_bsym(d, proxies, legacy_fusion: bool = False) -> BoundSymbol:
    _need(isinstance(d, dict), "symbol is not an object")
    sym, uid = d.get("sym"), d.get("uid")
    _need(isinstance(sym, str) and isinstance(uid, str), "symbol without sym/uid")
    # Names end up in generated code (kernel names, callee names): only dotted identifiers pass.
    _need(_SYMBOL_NAME.fullmatch(sym) is not None, f"bad symbol name {sym[:60]!r}")
    _need(_UID.fullmatch(uid) is not None, f"bad uid {uid[:60]!r}")
    args = _dec(d.get("args", {"T": []}), proxies)
    kwargs = _dec(d.get("kwargs", {"K": {}}), proxies)
    _need(isinstance(args, tuple) and isinstance(kwargs, dict), f"bad arguments for {uid}")
    _need(all(is_valid_name(k) and not iskeyword(k) for k in kwargs), f"bad keyword argument name for {uid}")
    _need(sym == "del" or sym.count(".") < 8 and len(sym) <= 200, f"bad symbol name {sym[:60]!r}")
    origin = d.get("origin", [])
    _need(isinstance(origin, list) and all(isinstance(o, str) for o in origin), f"bad origin for {uid}")
    seq_nr = d.get("seq_nr")
    _need(seq_nr is None or isinstance(seq_nr, int), f"bad seq_nr for {uid}")
    subs = d.get("subsymbols", [])
    _need(isinstance(subs, list), f"bad subsymbols for {uid}")
    opt = {k: d.get(k) for k in ("aten", "executor", "note")}
    for k, v in opt.items():
        _need(v is None or isinstance(v, str), f"bad {k} for {uid}")
    _need(opt["aten"] is None or _SYMBOL_NAME.fullmatch(opt["aten"]) is not None, f"bad aten name for {uid}")
    _need(opt["executor"] is None or is_valid_name(opt["executor"]), f"bad executor name for {uid}")
    fusion = d.get("fusion", False) or legacy_fusion
    _need(isinstance(fusion, bool), f"bad fusion flag for {uid}")
    _need(not fusion or bool(subs), f"fusion {uid} has no members")
    return BoundSymbol(sym=sym, args=args, kwargs=kwargs, outputs=_dec(d.get("outputs"), proxies),
                       uid=uid, origin=tuple(origin), source=_load_source(d.get("source")),
                       seq_nr=seq_nr, subsymbols=tuple(_load_bsym(s, proxies) for s in subs),
                       fusion=fusion, **opt)


def trace_from_dict(d: dict, fusion_names=None, shared: dict | None = None) -> Trace:
    """Rebuild a Trace from :func:`trace_to_dict` output; raise :class:`TraceFormatError`.
    ``fusion_names``: the kernel names recorded for this trace's chain (or a function returning
    them, called only when needed), used to recognise the fusion symbols of a format-1 trace
    (older recordings); None: recognise them by shape. ``shared``: a dict kept across the traces
    of one chain (start with ``{}``); a proxy or symbol equal to one an earlier trace loaded is
    that same object (see :func:`_shared_symbol`)."""
    try:
        return _trace_from_dict(d, fusion_names, shared)
    except RecursionError:
        raise TraceFormatError("the trace is nested too deeply") from None


def _proxies_in(x, found: dict) -> None:
    """Collect the proxies among ``x``'s leaves (slices' bounds included) as {name: proxy}."""
    if isinstance(x, TensorProxy):
        found[x.name] = x
    elif isinstance(x, (tuple, list)):
        for y in x:
            _proxies_in(y, found)
    elif isinstance(x, dict):
        for y in x.values():
            _proxies_in(y, found)
    elif isinstance(x, slice):
        _proxies_in((x.start, x.stop, x.step), found)


def _symbol_proxies(b: BoundSymbol, found: dict) -> dict:
    _proxies_in((b.args, b.kwargs, b.outputs), found)
    for s in b.subsymbols:
        _symbol_proxies(s, found)
    return found


def _shared_symbol(s: dict, proxies: dict, legacy_fusion: bool, shared: dict) -> BoundSymbol:
    """Load symbol ``s`` as :func:`_load_bsym` does, or return the symbol an earlier trace of the
    chain loaded from the same JSON when every proxy it names is, in this trace, that same (equal)
    object: loading it again would build an equal object after passing the same checks. Sharing
    them is what lets a recording's text caches, keyed by identity, reuse a symbol's text across
    passes, as they do for the passes of a compile."""
    memo = shared.setdefault("symbols", {})
    key = (_KEY_DUMPS(s), legacy_fusion)
    hit = memo.get(key)
    if hit is not None and all(proxies.get(n) is p for n, p in hit[1]):
        return hit[0]
    b = _load_bsym(s, proxies, legacy_fusion)
    memo[key] = (b, tuple(_symbol_proxies(b, {}).items()))
    return b


_KEY_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, check_circular=False).encode


def _trace_from_dict(d: dict, fusion_names=None, shared: dict | None = None) -> Trace:

    _need(isinstance(d, dict), "trace is not an object")
    _need(d.get("format") in READABLE_FORMATS, f"unsupported trace format {d.get('format')!r}")
    legacy = d.get("format") == 1
    if legacy and callable(fusion_names):
        fusion_names = set(fusion_names())
    proxies = {}
    # shared: a proxy whose JSON an earlier trace of the chain loaded is that trace's proxy (the
    # same text passed the same checks); symbols are shared only over the same proxy objects
    known = None if shared is None else shared.setdefault("proxies", {})
    for pd in d.get("proxies", []):
        if known is None or type(pd) is not dict:
            p = _load_proxy(pd)
        else:
            key = _KEY_DUMPS(pd)
            p = known.get(key)
            if p is None:
                p = known[key] = _load_proxy(pd)
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
    fx_names = d.get("fx_names", {})
    _need(isinstance(fx_names, dict) and all(
        n in inputs and isinstance(v, str) and len(v) < 256 and _SYMBOL_NAME.fullmatch(v) is not None
        for n, v in fx_names.items()), "bad fx_names")
    for s in syms:
        _need(isinstance(s, dict), "symbol is not an object")
    if shared is None:
        symbols = tuple(_load_bsym(s, proxies, legacy and _legacy_fusion(s, fusion_names)) for s in syms)
    else:
        symbols = tuple(_shared_symbol(s, proxies, legacy and _legacy_fusion(s, fusion_names), shared)
                        for s in syms)
    return Trace(name=str(d.get("name", "")), inputs=tuple(proxies[n] for n in inputs),
                 symbols=symbols, outputs=outputs,
                 chain=str(d.get("chain", "")), graph=d.get("graph", 0), pass_name=str(d.get("pass", "")),
                 next_uid=d.get("next_uid", 0), next_name=d.get("next_name", 0), meta=dict(meta),
                 fx_names=dict(fx_names))


def trace_from_json(text: str, fusion_names=None) -> Trace:
    """Rebuild a Trace from JSON text; raise :class:`TraceFormatError` on anything malformed
    (``fusion_names``: see :func:`trace_from_dict`)."""
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise TraceFormatError(f"not JSON: {e}") from None
    except RecursionError:
        raise TraceFormatError("not JSON: nested too deeply") from None
    return trace_from_dict(d, fusion_names)


# ------------------------------------------------------------------------------- kernel records

def _source_line_json(s: SourceLine) -> dict:
    return {"file": s.file, "line": s.line, "code": s.code, "module": s.module, "direction": s.direction}


def kernel_to_dict(k: KernelRecord) -> dict:
    """Return the JSON-ready kernel record (the recording's ``kernels.record``): the fields, the
    region trace under ``trace`` and the executor's ``details`` at top level."""
    d = {"name": k.name, "executor": k.executor, "uid": k.uid, "members": list(k.members),
         "ops": list(k.ops), "code": k.code, "language": k.language,
         "inputs": [_proxy_json(p) for p in k.inputs], "outputs": [_proxy_json(p) for p in k.outputs],
         "source_lines": [_source_line_json(s) for s in k.source_lines], "pass": k.pass_name,
         "note": k.note, "trace": trace_to_dict(k.region) if k.region is not None else None}
    for key, v in k.details.items():
        d.setdefault(key, v)
    return d


_KERNEL_KEYS = frozenset(("name", "executor", "uid", "members", "ops", "code", "language", "inputs",
                          "outputs", "source_lines", "pass", "note", "trace"))


def kernel_from_dict(d: dict) -> KernelRecord:
    """Rebuild a :class:`KernelRecord` from :func:`kernel_to_dict` output (validated; raise
    :class:`TraceFormatError`)."""
    _need(isinstance(d, dict), "kernel record is not an object")
    name, uid = d.get("name"), d.get("uid")
    _need(isinstance(name, str) and _SYMBOL_NAME.fullmatch(name) is not None, f"bad kernel name {str(name)[:60]!r}")
    _need(isinstance(uid, str) and _UID.fullmatch(uid) is not None, f"bad kernel uid {str(uid)[:60]!r}")
    strs = {}
    for key in ("members", "ops"):
        v = d.get(key, [])
        _need(isinstance(v, list) and all(isinstance(x, str) for x in v), f"bad {key} of kernel {name}")
        strs[key] = tuple(v)
    for key in ("executor", "code", "language", "pass"):
        _need(isinstance(d.get(key, ""), str), f"bad {key} of kernel {name}")
    _need(d.get("note") is None or isinstance(d.get("note"), str), f"bad note of kernel {name}")
    proxies = {}
    for key in ("inputs", "outputs"):
        v = d.get(key, [])
        _need(isinstance(v, list), f"bad {key} of kernel {name}")
        proxies[key] = tuple(_load_proxy(p) for p in v)
    lines = d.get("source_lines", [])
    _need(isinstance(lines, list) and all(isinstance(x, dict) for x in lines), f"bad source lines of kernel {name}")
    source_lines = []
    for x in lines:
        _need(isinstance(x.get("line", 0), int), f"bad source line of kernel {name}")
        source_lines.append(SourceLine(str(x.get("file", "")), x.get("line", 0), str(x.get("code", "")),
                                       str(x.get("module", "")), str(x.get("direction", "forward"))))
    region = d.get("trace")
    return KernelRecord(
        name=name, executor=d.get("executor", ""), uid=uid, members=strs["members"], ops=strs["ops"],
        code=d.get("code", ""), language=d.get("language", ""), inputs=proxies["inputs"],
        outputs=proxies["outputs"], source_lines=tuple(source_lines),
        region=trace_from_dict(region) if region is not None else None, pass_name=d.get("pass", ""),
        note=d.get("note"), details={k: v for k, v in d.items() if k not in _KERNEL_KEYS})


def executable_trace_from_dict(d: dict, shared: dict | None = None) -> Trace:
    """Rebuild a Trace that will be run or turned into code (rerun, repro): :func:`trace_from_dict`
    plus the registry's check of every symbol, kwarg key and constant (``shared``: as there). Raises
    :class:`TraceFormatError` (malformed) or :class:`.registry.UnknownSymbol` (not allowed)."""
    from .registry import check_executable
    trace = trace_from_dict(d, shared=shared)
    check_executable(trace)
    return trace
