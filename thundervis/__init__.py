"""thundervis: a recording Thunder-style compiler for PyTorch and the tools to inspect it.

``thundervis.jit(model)`` compiles through our backend (recording into the session recording, see
:mod:`thundervis.session`); ``torch.compile(model, backend="thundervis")`` works anywhere after
install. ``thundervis.show(obj)`` and ``thundervis.diff(a, b)`` open the Jupyter widgets (the
notebook extension is imported only when they are called). The recording store, diff, dot and CLI
live in this package; the compiler is ``thundervis.compiler``. Importing ``thundervis`` does not
import torch (the reading tools never need it); ``thundervis.jit`` loads the compiler on first use.
"""
from thundervis.compiler import triton_mode as _triton_mode

__version__ = "0.1.0"

_triton_mode.set_early()


def show(obj, **options):
    """Return the Jupyter widget for ``obj``: a recording path, an open recording, a function or
    module compiled with :func:`jit` in this process (its in-memory history), or a group folder of
    a multi-process run (one rank, a rank picker and the rank comparison; ``rank=N`` picks the
    first). Options as :func:`thundervis.notebook_ext.show`."""
    from thundervis.notebook_ext import show as show_widget
    return show_widget(obj, **options)


def __getattr__(name: str):
    # ``thundervis.jit`` (see :func:`thundervis.session.jit`) loads the compiler on first use.
    if name == "jit":
        from thundervis.session import jit
        return jit
    # ``thundervis.diff`` is the diff package, and calling it opens the diff widget (see
    # thundervis/diff/__init__.py); load it on first use like ``import thundervis.diff`` would.
    if name == "diff":
        import importlib
        return importlib.import_module("thundervis.diff")
    raise AttributeError(f"module 'thundervis' has no attribute {name!r}")
