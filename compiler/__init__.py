"""thundervis.compiler: a Thunder-style source-to-source compiler for PyTorch graphs.

Acquisition through ``torch.compile`` (Dynamo + AOTAutograd), a small trace IR with provenance,
pure ``Trace -> Trace`` passes reported to an observer, and executors that run the result.
This package never imports ``thundervis`` core or any UI toolkit.

Importing it does not import torch: the IR (``ir``), printer, serializer and ``values`` are pure
Python, so tools that only read recorded traces stay fast. The compiling entry points (``jit``,
``ThundervisCompiler``, the backend) load torch on first use, after Triton's interpreter mode is
decided (:mod:`.triton_mode`).
"""
from . import triton_mode as _triton_mode
from .ir import BoundSymbol, SourceInfo, Trace, TensorProxy  # noqa: F401
from .observer import CompileObserver  # noqa: F401
from .printer import PrintOptions, print_trace  # noqa: F401

_triton_mode.set_early()

_FROM_BACKEND = ("ThundervisCompiler", "jit", "set_defaults", "thundervis_backend")


def __getattr__(name: str):
    if name in _FROM_BACKEND:
        from . import backend
        return getattr(backend, name)
    raise AttributeError(f"module 'thundervis.compiler' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_FROM_BACKEND))
