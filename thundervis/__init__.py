"""thundervis: a recording Thunder-style compiler for PyTorch and the tools to inspect it.

``thundervis.jit(model)`` compiles through our backend; ``torch.compile(model, backend="thundervis")``
works anywhere after install. The recording store, diff, dot and CLI live in this package; the
compiler is ``thundervis.compiler``. Importing ``thundervis`` does not import torch (the reading
tools never need it); ``thundervis.jit`` loads the compiler on first use.
"""
from thundervis.compiler import triton_mode as _triton_mode

__version__ = "0.1.0"

_triton_mode.set_early()


def __getattr__(name: str):
    if name == "jit":
        from thundervis.compiler import jit
        return jit
    raise AttributeError(f"module 'thundervis' has no attribute {name!r}")
