"""thundervis: a recording Thunder-style compiler for PyTorch and the tools to inspect it.

``thundervis.jit(model)`` compiles through our backend (recording into the session recording, see
:mod:`thundervis.session`); ``torch.compile(model, backend="thundervis")`` works anywhere after
install. The notebook widgets open through :mod:`thundervis.api` (``import thundervis.api as tv``;
``tv.show(obj)``, ``tv.diff(a, b)``): the core never imports a view. The recording store, the
presentation layer (:mod:`thundervis.present`), diff, dot and CLI live in this package; the compiler is ``thundervis.compiler``. Importing ``thundervis`` does not
import torch (the reading tools never need it); ``thundervis.jit`` loads the compiler on first use.
"""
from thundervis.compiler import triton_mode as _triton_mode

__version__ = "0.1.0"

_triton_mode.set_early()


def __getattr__(name: str):
    # ``thundervis.jit`` (see :func:`thundervis.session.jit`) loads the compiler on first use.
    if name == "jit":
        from thundervis.session import jit
        return jit
    if name == "show":
        raise AttributeError("thundervis.show moved to thundervis.api.show (import thundervis.api as tv; "
                             "tv.show(obj)): the core never imports the notebook widgets")
    # ``thundervis.diff`` is the diff package (the diff widget is thundervis.api.diff); load it on
    # first use like ``import thundervis.diff`` would.
    if name == "diff":
        import importlib
        return importlib.import_module("thundervis.diff")
    raise AttributeError(f"module 'thundervis' has no attribute {name!r}")
