"""The user API for notebooks and scripts, and the one module that knows both the core and the
views: ``import thundervis.api as tv``.

- ``tv.jit(fn_or_module)``: compile through our backend, recording into the session recording
  (:func:`thundervis.session.jit`; loads torch and the compiler on first call);
- ``tv.show(obj)``: the Jupyter widget of a recording path, an open recording, a function or module
  compiled with ``tv.jit`` in this process, or a group folder (:func:`thundervis.notebook_ext.show`);
- ``tv.diff(a, b)``: the diff widget of two passes or two recordings
  (:func:`thundervis.notebook_ext.diff`).

The core (``thundervis`` and its tools) never imports a view; this module imports them explicitly,
and nothing in the core imports this module.
"""
from __future__ import annotations

from thundervis.notebook_ext import diff, show

__all__ = ["diff", "jit", "show"]


def jit(fn_or_module, **options):
    """Return ``fn_or_module`` compiled through the thundervis backend (see
    :func:`thundervis.session.jit`)."""
    from thundervis.session import jit as session_jit
    return session_jit(fn_or_module, **options)
