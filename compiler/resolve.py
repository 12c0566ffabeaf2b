"""Map symbol names to the Python callables that implement them (reference semantics).

A thin layer over :mod:`.registry`, which holds the allow-list and explains the policy: names are
looked up in the registry (prims, the value-only ATen overloads, and the operators and torch-level
callables the live compiler met in this process), never resolved by walking ``torch`` attributes.
"""
from __future__ import annotations

from .registry import UnknownSymbol, aten_overload, callable_for, is_registered_op

__all__ = ["UnknownSymbol", "resolve_overload", "resolve_symbol", "is_operator_name"]


def resolve_overload(name: str):
    """Return the OpOverload for ``aten.add.Tensor`` / ``prims.var.default`` (or a live operator of
    this process), or raise UnknownSymbol."""
    if not isinstance(name, str) or name.count(".") != 2:
        raise UnknownSymbol(f"{str(name)[:80]!r} is not an ATen overload name")
    return aten_overload(name)


def resolve_symbol(name: str):
    """Return the reference callable for a symbol name; raise :class:`UnknownSymbol`."""
    return callable_for(name)


def is_operator_name(name: str) -> bool:
    """Return True when ``name`` names a registry or live operator overload (``aten.add.Tensor``,
    ``myns.my_op.default`` once the compiler met it)."""
    return isinstance(name, str) and name.count(".") == 2 and is_registered_op(name)


def recorded_overload(b):
    """Return the ATen overload recorded on the bound symbol ``b`` (its ``aten``), or None when it
    has none or the name does not resolve (the caller falls back to the prim's own)."""
    if b.aten:
        try:
            return resolve_overload(b.aten)
        except UnknownSymbol:
            pass
    return None


def schema_arguments(op, args, kwargs) -> dict:
    """Return ``{schema argument name: value}`` for a call of the ATen overload ``op`` with ``args``
    and ``kwargs``: positional then keyword values, the schema's defaults for the rest (None where
    it has none)."""
    out: dict = {}
    for i, a in enumerate(op._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            out[a.name] = args[i]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return out
