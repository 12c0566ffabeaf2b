"""The recording store: one SQLite file per run, written by :class:`RecordingObserver` while the
compiler works and read back only through :func:`open_recording`, which returns the frozen values of
:mod:`thundervis.recording.model` (the view model every view reads).

Importing this package imports neither torch nor the compiler's pipeline: the writer (which needs
the compiler's observer interface) loads on first use of :class:`RecordingObserver`.
"""
from .model import (Chain, ChainLineage, ChainTiming, Event, Failure, Graph, KernelInfo,  # noqa: F401
                    KernelSource, KernelTiming, Lineage, LineageEnd, LineageStep, Overview, PassInfo,
                    PassRef, RerunResult, Revision, Run, SourceSnippet, Symbol, SymbolDetail, Timings,
                    UnknownItem, chain_position)
from .budgets import TooLarge  # noqa: F401
from .reader import Recording, RecordingError, open_recording  # noqa: F401
from .results import ResultsNotStored  # noqa: F401
from .schema import SCHEMA_VERSION  # noqa: F401
from .source_texts import line_budget  # noqa: F401
from .symbol_rows import TORCH_NOTED, SymbolRule  # noqa: F401


# Reading a group folder of rank recordings (recording.group): the front ends' door to it.
_GROUP_READING = ("Group", "GroupOverview", "RankSummary", "is_group", "open_group", "rank_ranges")


def __getattr__(name: str):
    if name == "RecordingObserver":
        from .writer import RecordingObserver
        return RecordingObserver
    if name in _GROUP_READING:  # group folders: loaded on first use (recording.group sits above the reader)
        from . import group
        return getattr(group, name)
    if name in ("lineage_of_uid", "lineage_of_source"):  # prefer Recording.lineage_of_uid / _source
        from . import lineage
        return getattr(lineage, name)
    raise AttributeError(f"module 'thundervis.recording' has no attribute {name!r}")
