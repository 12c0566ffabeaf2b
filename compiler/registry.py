"""The op registry: the allow-list of everything a trace may run, and the check of recorded traces.

Recordings are files people send each other, so nothing read from one is ever resolved by name
(no ``getattr`` walk over ``torch``, no import, no eval). Every callable a trace can reach comes
from this registry, keyed by the symbol's exact name:

- **prims** (``prims.add`` ...): the table in :mod:`.prims`; each runs as its ATen packet.
- **ATen overloads** (``aten.add.Tensor``, ``prims.iota.default``): every overload in the ``aten``
  and ``prims`` operator namespaces whose schema takes only *values* and computes tensors: tensors,
  numbers, bools, dtypes, devices, layouts, memory formats, lists and optionals of those, a
  ``Generator?`` that is always None, and strings only for the arguments whose values are a small
  known set (``rounding_mode``, ``approximate``, ``reduce`` ...; see :data:`STRING_ARGUMENTS`).
  An op that takes a file name, a storage, a stream, a TorchScript object or free-form text (such
  as ``aten.from_file``) is not in the registry.
- **live operators**: any other operator overload (custom ``torch.library`` ops, ATen ops outside
  the rule above) and the torch-level callables of Dynamo graphs (``torch.nn.functional.linear``,
  ``Tensor.view``, ``operator.add``) are registered by the acquisition (:func:`register_live`) when
  the compiler meets them in a live FX graph of this process, together with the object the graph
  called. They resolve only in that process, so a recording can name them (they are shown) but
  never make them run: a fresh process that loads a recording has none registered.

What each kind of symbol may be, per chain, when a trace is loaded for execution
(:func:`check_executable`, used by rerun, repro and anything that rebuilds code from a recording):

- ``dynamo`` chain: torch-level names, shown only; never executable from a recording.
- every other chain (``joint``, ``forward``, ``backward``, ``inference``, re-run regions): ``del``;
  prims and registry ATen overloads, whose arguments must bind to the overload's schema (kwarg keys
  are schema argument names, each value has the schema's type, strings are from the known set);
  fusion symbols (a plain identifier with subsymbols) whose subsymbols pass the same check. A fusion
  name is never called: the interpreter runs its subsymbols, executors regenerate its kernel.

Anything else raises :class:`UnknownSymbol` with one sentence before any code is generated or run.
"""
from __future__ import annotations

import functools
import re
import threading
from typing import Any, Callable, Optional

import torch

from .ir import BoundSymbol, Trace, TensorProxy
from .prims import PRIMS, prim_for

_NAMESPACES = ("aten", "prims")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")

# String arguments whose value is one of a known set (None: any text, used only as a message).
_FFT_NORM = frozenset({"forward", "backward", "ortho"})
STRING_ARGUMENTS: dict[str, Optional[frozenset]] = {
    "rounding_mode": frozenset({"trunc", "floor"}),
    "approximate": frozenset({"none", "tanh"}),
    "reduce": frozenset({"sum", "prod", "mean", "amax", "amin", "add", "multiply", "max", "min"}),
    "norm": _FFT_NORM,
    "side": frozenset({"left", "right"}),
    "indexing": frozenset({"ij", "xy"}),
    "interpolation": frozenset({"linear", "lower", "higher", "midpoint", "nearest"}),
    "padding": frozenset({"same", "valid"}),
    "UPLO": frozenset({"L", "U"}),
    "ord": frozenset({"fro", "nuc"}),
    "assert_msg": None,
}
# einsum's equation: letters, commas, dots, an arrow and spaces.
_EQUATION = re.compile(r"[A-Za-z.,\- >]{0,200}")

_SCALAR_TYPES = {"Tensor", "int", "bool", "float", "number", "ScalarType", "Layout", "MemoryFormat",
                 "Device", "str", "Generator"}


class UnknownSymbol(Exception):
    """A symbol name (or its arguments) that this process may not run: one sentence."""


def _type_ok(t: str, optional: bool = False) -> bool:
    """Return True when the schema type string ``t`` is a value type the registry accepts."""
    if t.startswith("Optional[") and t.endswith("]"):
        return _type_ok(t[len("Optional["):-1], True)
    if t.startswith("List[") and t.endswith("]"):
        inner = t[len("List["):-1]
        return inner in ("int", "bool", "float", "number", "Tensor", "Optional[Tensor]")
    if t == "Generator":
        return optional  # only ever None
    return t in _SCALAR_TYPES


def _returns_ok(schema) -> bool:
    for r in schema.returns:
        t = str(r.real_type)
        if not (t in ("Tensor", "int", "float", "bool", "number", "List[Tensor]")):
            return False
    return True


def _schema_allowed(schema) -> bool:
    """Return True when every argument of ``schema`` is a value (see the module docstring)."""
    tensors = any("Tensor" in str(r.real_type) for r in schema.returns)
    for a in schema.arguments:
        t = str(a.real_type)
        if not _type_ok(t):
            return False
        if t in ("str", "Optional[str]") and a.name not in STRING_ARGUMENTS and a.name != "equation":
            return False
        tensors = tensors or "Tensor" in t
    return tensors and _returns_ok(schema)


@functools.lru_cache(maxsize=1)
def _allowed_names() -> frozenset:
    """Return the qualified names (``aten.add.Tensor``) of every registry ATen overload."""
    names = set()
    for s in torch._C._jit_get_all_schemas():
        ns, _, op = s.name.partition("::")
        if ns in _NAMESPACES and _schema_allowed(s):
            names.add(f"{ns}.{op}.{s.overload_name or 'default'}")
    return frozenset(names)


_LOCK = threading.Lock()
_OVERLOADS: dict[str, Any] = {}
_LIVE: dict[str, Callable] = {}


def _fetch(ns: str, op: str, overload: str):
    """Return the OpOverload ``torch.ops.<ns>.<op>.<overload>`` of a name already in the registry."""
    namespace = torch.ops.aten if ns == "aten" else torch.ops.prims
    packet = getattr(namespace, op)
    return getattr(packet, overload)


def aten_overload(name: str, *, live: bool = True):
    """Return the registry OpOverload called ``name`` (``aten.add.Tensor``) or, with ``live``, an
    operator the compiler registered in this process; raise :class:`UnknownSymbol`."""
    hit = _OVERLOADS.get(name)
    if hit is not None:
        return hit
    found = _LIVE.get(name) if live else None
    if isinstance(found, torch._ops.OpOverload):
        return found
    if name not in _allowed_names():
        raise UnknownSymbol(f"{name[:80]!r} is not an operation thundervis may run")
    ns, op, overload = name.split(".")
    try:
        ov = _fetch(ns, op, overload)
    except (AttributeError, RuntimeError):
        raise UnknownSymbol(f"{name[:80]!r} is not an operation thundervis may run") from None
    if not isinstance(ov, torch._ops.OpOverload):
        raise UnknownSymbol(f"{name[:80]!r} is not an operator overload")
    with _LOCK:
        _OVERLOADS[name] = ov
    return ov


def is_registered_op(name: str) -> bool:
    """Return True when ``name`` names a registry ATen overload or a live operator."""
    try:
        aten_overload(name)
        return True
    except UnknownSymbol:
        return False


def register_live(name: str, target: Callable) -> None:
    """Record that the live compiler met ``target`` under symbol name ``name`` in this process (an
    FX call target: a custom operator, or a torch-level callable of a Dynamo graph)."""
    if name not in _LIVE and not (name.count(".") == 2 and name in _allowed_names()):
        with _LOCK:
            _LIVE.setdefault(name, target)


def callable_for(name: str) -> Callable:
    """Return the reference callable of symbol ``name``: a prim's packet, a registry ATen
    overload, or a live callable of this process; raise :class:`UnknownSymbol`."""
    if name.startswith("prims.") and name.count(".") == 1:
        prim = PRIMS.get(name[len("prims."):])
        if prim is None:
            raise UnknownSymbol(f"{name[:80]!r} is not a prim")
        return prim.packet
    live = _LIVE.get(name)
    if live is not None:
        return live
    if name.count(".") == 2:
        return aten_overload(name)
    raise UnknownSymbol(f"{name[:80]!r} is not an operation thundervis may run")


# ----------------------------------------------------------------------- checking recorded traces

def _what(v) -> str:
    return type(v).__name__ if not isinstance(v, TensorProxy) else "tensor"


def _value_ok(v, t: str, arg: str) -> bool:
    """Return True when the IR value ``v`` fits the schema type ``t`` of argument ``arg``."""
    if t.startswith("Optional["):
        return v is None or _value_ok(v, t[len("Optional["):-1], arg)
    if t.startswith("List["):
        inner = t[len("List["):-1]
        if isinstance(v, (list, tuple)):
            return all(_value_ok(x, inner, arg) for x in v)
        return inner in ("int", "number", "float") and _value_ok(v, inner, arg)  # int[1] takes an int
    if t == "Tensor":  # ATen wraps numbers passed for tensors
        return isinstance(v, (TensorProxy, bool, int, float))
    if t in ("int", "bool"):
        return isinstance(v, (bool, int))
    if t in ("float", "number"):
        return isinstance(v, (bool, int, float))
    if t == "ScalarType":
        return isinstance(v, torch.dtype)
    if t == "Layout":
        return isinstance(v, torch.layout)
    if t == "MemoryFormat":
        return isinstance(v, torch.memory_format)
    if t == "Device":
        return isinstance(v, torch.device)
    if t == "Generator":
        return v is None
    if t == "str":
        if not isinstance(v, str):
            return False
        if arg == "equation":
            return _EQUATION.fullmatch(v) is not None
        allowed = STRING_ARGUMENTS.get(arg, frozenset())
        return (allowed is None and len(v) <= 500) or (allowed is not None and v in allowed)
    return False


def _bind_problem(b: BoundSymbol, schema) -> Optional[str]:
    """Return why ``b``'s arguments do not bind to ``schema`` (one phrase), or None."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(b.args) > len(positional):
        return f"{len(b.args)} arguments, the schema takes {len(positional)}"
    names = {a.name: a for a in schema.arguments}
    given = {a.name: v for a, v in zip(positional, b.args)}
    for k, v in b.kwargs.items():
        if not isinstance(k, str) or k not in names:
            return f"keyword {str(k)[:40]!r} is not an argument of {schema.name}"
        if k in given:
            return f"argument {k!r} given twice"
        given[k] = v
    for a in schema.arguments:
        if a.name in given:
            if not _value_ok(given[a.name], str(a.real_type), a.name):
                return f"argument {a.name!r} holds a {_what(given[a.name])} value not allowed for {a.real_type}"
        elif not a.has_default_value() and not str(a.real_type).startswith("Optional["):
            return f"argument {a.name!r} is missing"
    return None


def _op_problem(b: BoundSymbol) -> Optional[str]:
    """Return why op symbol ``b`` (a prim or an ATen overload) may not run, or None."""
    if b.sym.startswith("prims.") and b.sym.count(".") == 1:
        prim = PRIMS.get(b.sym[len("prims."):])
        if prim is None:
            return f"{b.sym[:80]!r} is not a prim"
        if b.aten is not None:
            try:
                ov = aten_overload(b.aten, live=False)
            except UnknownSymbol as e:
                return str(e)
            found = prim_for(ov)
            if found is None or found.name != prim.name:
                return f"{b.sym} records the ATen overload {b.aten[:80]!r}, which is not that prim"
            return _bind_problem(b, ov._schema)
        problems = []
        for o in prim.packet.overloads():
            ov = getattr(prim.packet, o)
            if prim_for(ov) is None:
                continue
            why = _bind_problem(b, ov._schema)
            if why is None:
                return None
            problems.append(why)
        return problems[0] if problems else f"{b.sym} has no overload to run"
    try:
        ov = aten_overload(b.sym, live=False)
    except UnknownSymbol as e:
        return str(e)
    if b.aten is not None and b.aten != b.sym:
        return f"{b.sym} records another ATen overload ({b.aten[:80]!r})"
    return _bind_problem(b, ov._schema)


def symbol_problem(b: BoundSymbol) -> Optional[str]:
    """Return why ``b`` (with its subsymbols) may not be rebuilt and run, or None when it may."""
    if b.sym == "del":
        return None if all(isinstance(p, TensorProxy) for p in b.args) and not b.kwargs else "bad del"
    if b.executor is not None and not _IDENT.fullmatch(b.executor):
        return f"executor name {b.executor[:40]!r} is not an identifier"
    if "." not in b.sym:  # a fusion: never called by name
        if not b.subsymbols:
            return f"{b.sym[:80]!r} is not an operation thundervis may run"
        if not b.sym.isidentifier():
            return f"fusion name {b.sym[:80]!r} is not an identifier"
        if b.kwargs:
            return f"fusion {b.sym} has keyword arguments"
        for s in b.subsymbols:
            why = symbol_problem(s)
            if why is not None:
                return why
        return None
    why = _op_problem(b)
    if why is not None:
        return f"{b.sym[:80]} ({b.uid}): {why}" if not why.startswith(repr(b.sym[:80])) else why
    for s in b.subsymbols:
        why = symbol_problem(s)
        if why is not None:
            return why
    return None


def check_executable(trace: Trace) -> None:
    """Raise :class:`UnknownSymbol` (one sentence) unless every symbol of ``trace`` may be rebuilt
    and run from a recording: the per-chain policy of the module docstring. Only the static
    registry counts here, never what the live compiler registered in this process."""
    if trace.chain == "dynamo":
        raise UnknownSymbol("the dynamo chain holds torch-level calls, which are shown but never run from a recording")
    for b in trace.symbols:
        why = symbol_problem(b)
        if why is not None:
            raise UnknownSymbol(why)
