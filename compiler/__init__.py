"""thundervis.compiler: a Thunder-style source-to-source compiler for PyTorch graphs.

Acquisition through ``torch.compile`` (Dynamo + AOTAutograd), a small trace IR with provenance,
pure ``Trace -> Trace`` passes reported to an observer, and executors that run the result.
This package never imports ``thundervis`` core or any UI toolkit.
"""
from .backend import ThundervisCompiler, jit, set_defaults, thundervis_backend  # noqa: F401
from .ir import BoundSymbol, SourceInfo, Trace, TensorProxy  # noqa: F401
from .observer import CompileObserver  # noqa: F401
from .printer import PrintOptions, print_trace  # noqa: F401
