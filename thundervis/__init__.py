"""thundervis: a recording Thunder-style compiler for PyTorch and the tools to inspect it.

``thundervis.jit(model)`` compiles through our backend; ``torch.compile(model, backend="thundervis")``
works anywhere after install. The recording store, diff, dot and CLI live in this package; the
compiler is ``thundervis.compiler``.
"""
from thundervis.compiler import jit  # noqa: F401

__version__ = "0.1.0"
