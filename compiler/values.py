"""Conversion of torch values (FakeTensors, dtypes, devices, constants) into IR values, and their
printed form.

Importable without torch: a process that never imported torch (the reading commands, a viewer)
gets dtype, device, layout and memory-format constants of loaded traces as :class:`TorchConstant`
stand-ins, which print, compare and serialize like the torch objects. Every function that needs
torch itself imports it.
"""
from __future__ import annotations

import keyword
import math
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ir import TensorProxy

if TYPE_CHECKING:  # pragma: no cover
    import torch

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch only

# The names of every dtype, layout and memory format torch defines (torch 2.13; as str() prints
# them), for checking recorded names where torch is not imported. Where it is, the tables are built
# once from torch's own namespace (:func:`_torch_tables`). Either way a name read from a recording
# is looked up in a table, never resolved on torch.
_DTYPE_NAMES = frozenset({
    "bfloat16", "bits16", "bits1x8", "bits2x4", "bits4x2", "bits8", "bool", "complex128", "complex32",
    "complex64", "float16", "float32", "float4_e2m1fn_x2", "float64", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int16", "int2", "int3", "int32", "int4",
    "int5", "int6", "int64", "int7", "int8", "qint32", "qint8", "quint2x4", "quint4x2", "quint8", "uint1",
    "uint16", "uint2", "uint3", "uint32", "uint4", "uint5", "uint6", "uint64", "uint7", "uint8"})
_LAYOUT_NAMES = frozenset({"_mkldnn", "jagged", "sparse_bsc", "sparse_bsr", "sparse_coo", "sparse_csc",
                           "sparse_csr", "strided"})
_MEMORY_FORMAT_NAMES = frozenset({"channels_last", "channels_last_3d", "contiguous_format", "preserve_format"})
# A device as torch prints it: a known type and an optional small index.
DEVICE = re.compile(r"(cpu|cuda|meta|mps|xpu|hpu|mtia|privateuseone)(:[0-9]{1,4})?")
_TABLES: dict = {}


def _torch_tables() -> dict:
    """Return {"DTYPES", "LAYOUTS", "MEMORY_FORMATS"}: name -> torch object, every one torch
    defines, built once from torch's namespace (imports torch)."""
    if not _TABLES:
        import torch
        objs = list(vars(torch).values())
        _TABLES["DTYPES"] = {str(v).removeprefix("torch."): v for v in objs if isinstance(v, torch.dtype)}
        _TABLES["LAYOUTS"] = {str(v).removeprefix("torch."): v for v in objs if isinstance(v, torch.layout)}
        _TABLES["MEMORY_FORMATS"] = {str(v).removeprefix("torch."): v for v in objs
                                     if isinstance(v, torch.memory_format)}
    return _TABLES


def __getattr__(name: str):
    # DTYPES / LAYOUTS / MEMORY_FORMATS, built on first use (imports torch).
    if name in ("DTYPES", "LAYOUTS", "MEMORY_FORMATS"):
        return _torch_tables()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _known(kind: str) -> frozenset:
    """The names of ``kind`` (dtype, layout, memory_format): torch's own where torch is imported."""
    if loaded_torch() is not None:
        table = {"dtype": "DTYPES", "layout": "LAYOUTS", "memory_format": "MEMORY_FORMATS"}[kind]
        return frozenset(_torch_tables()[table])
    return {"dtype": _DTYPE_NAMES, "layout": _LAYOUT_NAMES, "memory_format": _MEMORY_FORMAT_NAMES}[kind]


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
    """Return the torch dtype named ``name`` (``float32``) from the table; raise ValueError for
    anything else. Imports torch."""
    d = _torch_tables()["DTYPES"].get(name) if isinstance(name, str) else None
    if d is None:
        raise ValueError(f"{str(name)[:40]!r} is not a torch dtype")
    return d


def is_dtype_name(name) -> bool:
    """Return True when ``name`` names a torch dtype (see :func:`_known`)."""
    return isinstance(name, str) and name in _known("dtype")


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
        if name not in _DTYPE_NAMES:
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
    if kind not in ("layout", "memory_format") or name not in _known(kind):
        raise ValueError(f"bad layout/format {name[:40]!r}")
    if torch is not None:
        return _torch_tables()["LAYOUTS" if kind == "layout" else "MEMORY_FORMATS"][name]
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


def is_dense(shape, strides) -> bool:
    """Return True when ``strides`` lay a tensor of ``shape`` out densely (every element once, no
    gaps, in some dim order), the layouts a functional op can produce; views such as a diagonal
    (stride ``n + 1``) or an unfold (overlapping windows) are not dense."""
    dims = sorted((int(st), int(sz)) for sz, st in zip(shape, strides) if int(sz) > 1)
    expected = 1
    for st, sz in dims:
        if st != expected:
            return False
        expected *= sz
    return True


def float_source(v: float) -> str:
    """Return Python source for the float ``v`` (``float('nan')``, ``float('inf')`` or its repr)."""
    if math.isnan(v):
        return "float('nan')"
    if math.isinf(v):
        return "float('inf')" if v > 0 else "float('-inf')"
    return repr(v)


def is_valid_name(name: str) -> bool:
    """Return True when ``name`` is a plain Python identifier that is not a keyword (proxy names
    must be: they are printed into generated code). ``fullmatch``, because ``$`` would accept a
    trailing newline (``t29\\n``); keywords (``import``, ``None``...) cannot name a value."""
    return isinstance(name, str) and _IDENT.fullmatch(name) is not None and not keyword.iskeyword(name)


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
        # Dynamic-shape graphs reach the compiler one concrete shape at a time (shape_specialize);
        # a symbol left here is one that specialization did not replace.
        raise UnsupportedValue(f"symbolic value {value}: the trace IR holds concrete sizes only")
    if isinstance(value, complex):
        raise UnsupportedValue(f"the complex constant {value!r}: the trace IR has no complex scalars")
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
