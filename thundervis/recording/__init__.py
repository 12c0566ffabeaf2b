"""The recording store: one SQLite file per run, written by :class:`RecordingObserver` while the
compiler works and read back only through :func:`open_recording` (plain dataclasses)."""
from .lineage import Lineage, lineage_of_source, lineage_of_uid  # noqa: F401
from .reader import (Chain, Event, Failure, Graph, Kernel, PassInfo, Recording,  # noqa: F401
                     RecordingError, Run, Symbol, UnknownItem, open_recording)
from .schema import SCHEMA_VERSION  # noqa: F401
from .writer import RecordingObserver  # noqa: F401
