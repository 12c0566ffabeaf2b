"""The diff engine: pass diffs (align two traces of one chain), their renderings, trace fingerprints
and run comparison. Pure functions over compiler traces and kernel records; no UI toolkit imports.
The notebook's diff widget is ``thundervis.show_diff(a, b)`` (:mod:`thundervis.api`)."""
from .align import (ADDED, CHANGED, FUSED, MOVED, REMOVED, REPLACED, STATUSES, UNCHANGED, DiffLine,  # noqa: F401
                    TraceDiff, align_lines, diff_traces, intraline_spans)
from .fingerprint import PassChange, changed_pass_names, pass_changes, trace_fingerprint  # noqa: F401
from .lines import Line, is_fusion, trace_lines  # noqa: F401
