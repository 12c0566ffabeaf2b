"""A rank's variant fingerprint (recording/rank_file.py) covers which kernels fold into which: two
ranks whose folds differ read different code for a folded kernel, so they are not one variant."""
from __future__ import annotations

import sqlite3

from thundervis.recording.rank_file import variant_fingerprint
from thundervis.recording.schema import create_schema


def _conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    create_schema(conn, "test")
    return conn


def test_kernel_folds_are_part_of_the_variant():
    a, b = _conn(), _conn()
    assert variant_fingerprint(a) == variant_fingerprint(b)
    a.execute("INSERT INTO kernel_folds (kernel_id, fold_of) VALUES (3, 1)")
    b.execute("INSERT INTO kernel_folds (kernel_id, fold_of) VALUES (3, 2)")
    assert variant_fingerprint(a) != variant_fingerprint(b)
    b.execute("UPDATE kernel_folds SET fold_of = 1")
    assert variant_fingerprint(a) == variant_fingerprint(b)


def test_a_recording_without_the_folds_table_still_has_a_fingerprint():
    conn = _conn()
    conn.execute("DROP TABLE kernel_folds")
    assert len(variant_fingerprint(conn)) == 64
