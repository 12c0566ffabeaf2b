"""thundervis.compiler: a Thunder-style source-to-source compiler for PyTorch graphs.

Acquisition through ``torch.compile`` (Dynamo + AOTAutograd), a small trace IR with provenance,
pure ``Trace -> Trace`` passes reported to an observer, and executors that run the result.
This package never imports ``thundervis`` core or any UI toolkit.
"""
import os as _os
import sys as _sys

import torch as _torch

# Without CUDA, Triton kernels run only in Triton's interpreter, and Triton decides that when it is
# first imported (torch's AOTAutograd imports it), so the flag is set here, before anything else.
if (_os.environ.get("TRITON_INTERPRET") is None and "triton" not in _sys.modules
        and not _torch.cuda.is_available()):
    _os.environ["TRITON_INTERPRET"] = "1"

from .backend import ThundervisCompiler, jit, set_defaults, thundervis_backend  # noqa: E402,F401
from .ir import BoundSymbol, SourceInfo, Trace, TensorProxy  # noqa: E402,F401
from .observer import CompileObserver  # noqa: E402,F401
from .printer import PrintOptions, print_trace  # noqa: E402,F401
