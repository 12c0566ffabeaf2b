"""Groups of rank recordings for the widget tests, made without torchrun: ordinary recordings
copied in as rank files with the ``distributed`` event a worker records, a launch file, and the
real packing (``pack_group``), as tests/core/test_group.py and benchmarks/rank_scale.py do."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

# Synthetic medians (ms) per rank for every timed kernel, and the one kernel rank 1 runs 10x
# slower than rank 0: the top of the skew table.
RANK_MEDIAN_MS = {0: 0.010, 1: 0.030, 2: 0.020, 3: 0.015}
SLOW_MS = 0.100


def as_rank(path: str, rank: int, world: int, host: str | None = None) -> None:
    """Make a copied recording rank ``rank`` of ``world``: the worker's ``distributed`` event and,
    when given, the run's host."""
    c = sqlite3.connect(path)
    with c:
        c.execute("DELETE FROM events WHERE event='distributed'")
        c.execute("INSERT INTO events(event, data, at) VALUES ('distributed', ?, 0)",
                  (json.dumps({"rank": rank, "local_rank": rank, "world_size": world, "node_rank": 0}),))
        if host is not None:
            c.execute("UPDATE run SET host=?", (host,))
    c.close()


def set_timings(path: str, median_ms: float, slow: tuple | None = None) -> None:
    """Give every timed kernel of the recording ``median_ms``; ``slow`` ``(graph, chain, name,
    ms)`` gives one kernel its own time."""
    c = sqlite3.connect(path)
    with c:
        c.execute("UPDATE kernel_timings SET median_ms=?, min_ms=?, max_ms=?", (median_ms,) * 3)
        if slow is not None:
            g, ch, name, ms = slow
            c.execute("UPDATE kernel_timings SET median_ms=?, min_ms=?, max_ms=? WHERE graph_id=? AND chain=? "
                      "AND name=?", (ms, ms, ms, g, ch, name))
    c.close()


def unique_kernel(path: str) -> tuple:
    """Return (graph, chain, name) of a timed kernel whose name is unique in its chain."""
    c = sqlite3.connect(path)
    try:
        row = c.execute("SELECT graph_id, chain, name FROM kernel_timings GROUP BY graph_id, chain, name "
                        "HAVING COUNT(*) = 1 ORDER BY graph_id, chain, name LIMIT 1").fetchone()
    finally:
        c.close()
    assert row is not None, "no timed kernel"
    return tuple(row)


def write_launch(folder: str, target: list) -> None:
    """Write node 0's launch file (ended ``ok``)."""
    from thundervis.recording.group import finish_launch, start_launch
    path = start_launch(folder, node_rank=0, torchrun_args=["--nproc-per-node", "4"], target=target, cwd=folder)
    finish_launch(path, status="ok", exit_code=0, failures=[])


def make_group(folder: str, sources: list, world: int, hosts: dict | None = None, target=("train.py",)) -> str:
    """Copy ``sources`` (one per rank, in order) into the group ``folder`` as rank files of a job of
    ``world`` ranks, write its launch file and pack it; return the folder."""
    from thundervis.recording.group_store import pack_group
    os.makedirs(folder)
    for rank, src in enumerate(sources):
        dst = os.path.join(folder, f"rank-{rank:05d}.tvrec")
        shutil.copy(src, dst)
        as_rank(dst, rank, world, (hosts or {}).get(rank))
    write_launch(folder, list(target))
    pack_group(folder)
    return folder
