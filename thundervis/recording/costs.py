"""The roofline costs of each chain's final trace: storing them with the ``codegen`` pass (the
writer) and reading them back (the reader), one owner for the SQL of table ``symbol_costs``.

A row is one top-level symbol of the final trace, in call order: its bytes read and written, FLOPs
and the precision whose peak it is held to (``compiler/roofline_cost.py``). Every value read is
validated; a damaged row is a ``RecordingError``. Recordings without the table have no stored
costs (views then cost the final traces themselves).
"""
from __future__ import annotations

from thundervis.compiler.roofline_cost import KINDS, PRECISIONS, Cost

from .errors import RecordingError

MAX_COUNT = 2**62  # bytes and FLOPs fit SQLite's 64-bit integers


def store_costs(conn, graph: int, chain: str, costs) -> None:
    """Replace the stored costs of ``graph``/``chain`` with ``costs`` (``Cost`` in call order),
    within the writer's transaction ``conn``."""
    conn.execute("DELETE FROM symbol_costs WHERE graph_id=? AND chain=?", (graph, chain))
    conn.executemany(
        "INSERT INTO symbol_costs(graph_id, chain, position, uid, name, kind, bytes_read, bytes_written, flops,"
        " precision) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(graph, chain, i, c.uid, c.name, c.kind, min(c.bytes_read, MAX_COUNT), min(c.bytes_written, MAX_COUNT),
          min(c.flops, MAX_COUNT), c.precision) for i, c in enumerate(costs)])


def read_costs(rec) -> dict:
    """Return {(graph, chain): [Cost] in call order} stored in ``rec`` (a ``Recording``); {} for a
    recording without the table."""
    if not rec.store.has_table("symbol_costs"):
        return {}
    out: dict = {}
    rows = rec.store.rows("SELECT graph_id, chain, uid, name, kind, bytes_read, bytes_written, flops, precision"
                          " FROM symbol_costs ORDER BY graph_id, chain, position")
    for g, chain, uid, name, kind, read, written, flops, precision in rows:
        if not isinstance(g, int) or not all(isinstance(x, str) for x in (chain, uid, name)) \
                or kind not in KINDS or precision not in PRECISIONS \
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT
                           for v in (read, written, flops)):
            raise RecordingError(f"{rec.path} is corrupted (a stored roofline cost has a bad value).")
        out.setdefault((g, chain), []).append(Cost(name, uid, kind, read, written, flops, precision))
    return out
