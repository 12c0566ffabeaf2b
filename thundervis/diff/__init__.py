"""The diff engine: pass diffs (align two traces of one chain), their renderings, trace fingerprints
and run comparison. Pure functions over compiler traces and kernel records; no UI toolkit imports."""
import sys
import types

from .align import (ADDED, CHANGED, FUSED, MOVED, REMOVED, REPLACED, STATUSES, UNCHANGED, DiffLine,  # noqa: F401
                    TraceDiff, align_lines, diff_traces, intraline_spans)
from .fingerprint import PassChange, changed_pass_names, pass_changes, trace_fingerprint  # noqa: F401
from .lines import Line, is_fusion, trace_lines  # noqa: F401


class _CallableDiffModule(types.ModuleType):
    """``thundervis.diff`` stays this package, and ``thundervis.diff(a, b)`` opens the notebook's
    diff widget (two passes, or two recordings): one name for the one idea."""

    def __call__(self, a, b, **options):
        """Return the diff widget of ``a`` and ``b`` (see :func:`thundervis.notebook_ext.diff`)."""
        from thundervis.notebook_ext import diff as diff_widget
        return diff_widget(a, b, **options)


sys.modules[__name__].__class__ = _CallableDiffModule
