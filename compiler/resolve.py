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
