"""Conversion of torch values (FakeTensors, dtypes, devices, constants) into IR values, and their
printed form.

Importable without torch: a process that never imported torch (the reading commands, a viewer)
gets dtype, device, layout and memory-format constants of loaded traces as :class:`TorchConstant`
stand-ins, which print, compare and serialize like the torch objects. Every function that needs
torch itself imports it.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ir import TensorProxy

if TYPE_CHECKING:  # pragma: no cover
    import torch

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Every dtype, layout and memory format by name, from fixed tables (names come from recordings: they
# are checked against these and never looked up on torch otherwise). Names only, so that reading
# a recording needs no torch; the torch objects are looked up by these names when torch is there.
DTYPE_NAMES = frozenset({
    "float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128", "uint8", "int8",
    "int16", "int32", "int64", "bool", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "qint8", "quint8", "qint32"})
LAYOUT_NAMES = frozenset({"strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
                          "_mkldnn", "jagged"})
MEMORY_FORMAT_NAMES = frozenset({"contiguous_format", "channels_last", "channels_last_3d", "preserve_format"})
# A device as torch prints it: a known type and an optional small index.
DEVICE = re.compile(r"(cpu|cuda|meta|mps|xpu|hpu|mtia|privateuseone)(:[0-9]{1,4})?")


def __getattr__(name: str):
    # DTYPES / LAYOUTS / MEMORY_FORMATS: name -> torch object, built on first use (imports torch).
    tables = {"DTYPES": DTYPE_NAMES, "LAYOUTS": LAYOUT_NAMES, "MEMORY_FORMATS": MEMORY_FORMAT_NAMES}
    if name in tables:
        import torch
        table = {n: getattr(torch, n) for n in sorted(tables[name])}
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def loaded_torch():
    """Return the torch module when this process has imported it, else None (never imports it)."""
    return sys.modules.get("torch")


@dataclass(frozen=True)
class TorchConstant:
    """A dtype, device, layout or memory format of a trace loaded where torch is not imported:
    ``kind`` is ``dtype``, ``device``, ``layout`` or ``memory_format``, ``name`` what torch calls
    it (``float32``, ``cuda:0``, ``strided``). Prints and serializes as the torch object would."""

    kind: str
    name: str

    def __str__(self) -> str:
        return self.name if self.kind == "device" else f"torch.{self.name}"


def dtype_name(dtype) -> str:
    """Return ``float32`` for ``torch.float32`` (or its :class:`TorchConstant`)."""
    if isinstance(dtype, TorchConstant):
        return dtype.name
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> "torch.dtype":
    """Return the torch dtype named ``name`` (``float32``) from the fixed table; raise ValueError
    for anything else. Imports torch."""
    if not isinstance(name, str) or name not in DTYPE_NAMES:
        raise ValueError(f"{str(name)[:40]!r} is not a torch dtype")
    import torch
    d = getattr(torch, name)  # a name from the fixed table, never one read from a recording
    return d


def is_dtype_name(name) -> bool:
    """Return True when ``name`` is in the fixed dtype table."""
    return isinstance(name, str) and name in DTYPE_NAMES


def torch_constant(kind: str, name):
    """Return the dtype/device/layout/memory format ``name`` (``kind`` as in
    :class:`TorchConstant`): the torch object when torch is imported, else a :class:`TorchConstant`;
    raise ValueError for a name torch does not know."""
    torch = loaded_torch()
    if not isinstance(name, str) or len(name) > 64:
        raise ValueError(f"bad {kind} {str(name)[:60]!r}")
    if kind == "dtype":
        if torch is not None:
            return torch_dtype(name)
        if name not in DTYPE_NAMES:
            raise ValueError(f"{name[:40]!r} is not a torch dtype")
        return TorchConstant("dtype", name)
    if kind == "device":
        if not DEVICE.fullmatch(name):
            raise ValueError(f"bad device {name[:40]!r}")
        if torch is not None:
            try:
                return torch.device(name)
            except (RuntimeError, TypeError):
                raise ValueError(f"bad device {name[:40]!r}") from None
        return TorchConstant("device", name)
    names = LAYOUT_NAMES if kind == "layout" else MEMORY_FORMAT_NAMES
    if name not in names:
        raise ValueError(f"bad layout/format {name[:40]!r}")
    if torch is not None:
        return getattr(torch, name)  # a name from the fixed table
    return TorchConstant(kind, name)


def constant_kind(v):
    """Return ``dtype``/``device``/``layout``/``memory_format`` for such a constant (a torch object
    or a :class:`TorchConstant`), else None."""
    if isinstance(v, TorchConstant):
        return v.kind
    torch = loaded_torch()
    if torch is None:
        return None
    if isinstance(v, torch.dtype):
        return "dtype"
    if isinstance(v, torch.device):
        return "device"
    if isinstance(v, torch.layout):
        return "layout"
    if isinstance(v, torch.memory_format):
        return "memory_format"
    return None


def proxy_for(name: str, t: "torch.Tensor") -> TensorProxy:
    """Return a proxy called ``name`` with the metadata of tensor ``t`` (real, meta or fake)."""
    try:
        strides = tuple(int(s) for s in t.stride())
    except Exception:  # sparse or otherwise strideless tensors
        strides = None
    return TensorProxy(name, tuple(int(s) for s in t.shape), dtype_name(t.dtype), str(t.device), strides)


def contiguous_strides(shape) -> tuple[int, ...]:
    """Return the row-major strides of a tensor of ``shape``."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def is_valid_name(name: str) -> bool:
    """Return True when ``name`` is a plain Python identifier (proxy names must be)."""
    return bool(_IDENT.match(name)) and name not in ("None", "True", "False")


class UnsupportedValue(Exception):
    """A value (symbolic int, opaque object ...) that the IR cannot represent."""


def constant(value):
    """Return ``value`` as an IR constant, or raise :class:`UnsupportedValue`."""
    import torch
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(constant(v) for v in value)
    if isinstance(value, slice):
        return slice(constant(value.start), constant(value.stop), constant(value.step))
    if value is Ellipsis:
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise UnsupportedValue(f"symbolic value {value} (dynamic shapes are not supported yet)")
    raise UnsupportedValue(f"value of type {type(value).__name__}")


def format_constant(value) -> str:
    """Return Python source that evaluates to the constant ``value``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    kind = constant_kind(value)
    if kind == "dtype":
        return f"torch.{dtype_name(value)}"
    if kind == "device":
        return f"torch.device({str(value)!r})"
    if kind is not None:
        return str(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, slice):
        return f"slice({format_value(value.start)}, {format_value(value.stop)}, {format_value(value.step)})"
    if value is Ellipsis:
        return "..."
    return repr(value)


def format_value(value) -> str:
    """Return Python source for an argument: a proxy's name or a constant."""
    if isinstance(value, TensorProxy):
        return value.name
    return format_constant(value)
