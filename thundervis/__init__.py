"""thundervis: a recording Thunder-style compiler for PyTorch and the tools to inspect it.

``thundervis.jit(model)`` compiles through our backend (recording into the session recording, see
:mod:`thundervis.session`); ``torch.compile(model, backend="thundervis")`` works anywhere after
install. ``thundervis.show(obj)`` and ``thundervis.show_diff(a, b)`` open the Jupyter widgets
through :mod:`thundervis.api`, the one module that knows both the core and the views (the notebook
extension is imported only when they are called). The recording store, diff, dot and CLI
live in this package; the compiler is ``thundervis.compiler``. Importing ``thundervis`` does not
import torch (the reading tools never need it); ``thundervis.jit`` loads the compiler on first use.
"""
from thundervis.compiler import observer as _compiler_observer
from thundervis.compiler import triton_mode as _triton_mode

from thundervis._version import __version__  # noqa: F401

_triton_mode.set_early()


def _session_observer():
    from thundervis.session import backend_observer
    return backend_observer()


def _backend_loaded():
    from thundervis.dynamo_breaks import watch_for_session
    watch_for_session()


# torch.compile(backend="thundervis") outside a run records into the session recording, graph
# breaks included (thundervis.session); the compiler calls these hooks, never imports us.
_compiler_observer.set_session_hooks(_session_observer, _backend_loaded)


def show(obj, **options):
    """Return the Jupyter widget for ``obj``: a recording path, an open recording, a function or
    module compiled with :func:`jit` in this process (its in-memory history), or a group folder of
    a multi-process run (one rank, a rank picker and the rank comparison; ``rank=N`` picks the
    first). Options as :func:`thundervis.notebook_ext.show`; opened through :mod:`thundervis.api`."""
    from thundervis.api import show as show_widget
    return show_widget(obj, **options)


def show_diff(a, b, **options):
    """Return the diff widget of two passes, each ``(source, chain, pass)``, or of two recordings
    (:func:`thundervis.notebook_ext.diff`; opened through :mod:`thundervis.api`)."""
    from thundervis.api import show_diff as diff_widget
    return diff_widget(a, b, **options)


def __getattr__(name: str):
    # ``thundervis.jit`` (see :func:`thundervis.session.jit`) loads the compiler on first use.
    if name == "jit":
        from thundervis.session import jit
        return jit
    if name == "abstract_mode":  # fake tensors around a notebook's step (thundervis.abstract_run)
        from thundervis.abstract_run import abstract_mode
        return abstract_mode
    # ``thundervis.diff`` is the diff engine package; load it on first use like ``import
    # thundervis.diff`` would (the diff widget is :func:`show_diff`).
    if name == "diff":
        import importlib
        return importlib.import_module("thundervis.diff")
    raise AttributeError(f"module 'thundervis' has no attribute {name!r}")
