"""tui.group_data: what the group views read (rank rows, times, variants, cross-rank diffs), on
synthetic groups written through the real writer and packed by the real ``pack_group``."""
from __future__ import annotations

import os
import shutil

from _synthetic_group import write_group

from thundervis.tui.group_data import open_group_data, variant_labels


def test_variant_labels_follow_the_lowest_rank_and_fall_back_to_fingerprints():
    variants = {"bbbb": (1, 3), "aaaa": (0, 2), "cccc": (4,)}
    assert variant_labels(variants) == {"aaaa": "A", "bbbb": "B", "cccc": "C"}
    many = {f"{i:016x}": (i,) for i in range(28)}
    labels = variant_labels(many)
    assert labels[f"{25:016x}"] == "Z" and labels[f"{27:016x}"] == f"{27:016x}"[:8]


def test_rank_rows_times_and_cross_rank_diff(variant_group):
    data = open_group_data(variant_group)
    try:
        rows = data.rank_rows()
        assert [(r.rank, r.status, r.variant, r.problem) for r in rows] == [
            (0, "ok", "A", None), (1, "ok", "B", None), (2, "ok", "A", None)]
        assert data.rank_times(2) == (1500.0, 1.5)
        info = data.info()
        assert (info.n_ranks, info.status, info.identical, info.n_variants) == (3, "ok", False, 2)
        rows_, counts = data.rank_diff_rows(0, 1, 0, "forward", 0, False, 3)
        assert counts["added"] == 4 and rows_
        side, _ = data.rank_diff_rows(0, 1, 0, "forward", 0, True, None)
        assert len(side) >= 44
        same, counts = data.rank_diff_rows(0, 2, 0, "forward", 6, False, 3)
        assert not any(v for k, v in counts.items() if k != "unchanged")
    finally:
        data.close()


def test_a_group_copied_without_its_store_still_opens(tmp_path):
    """The group's texts missing: every rank row says so; the group still opens on its first rank."""
    group = write_group(str(tmp_path), variants=(0, 0))
    shutil.move(os.path.join(group, "traces.tvstore"), os.path.join(tmp_path, "elsewhere.tvstore"))
    data = open_group_data(group)
    try:
        rows = data.rank_rows()
        assert all(r.problem and "traces.tvstore" in r.problem for r in rows)
        rank, rec = data.start()
        assert rank == 0 and rec.overview().graphs
    finally:
        data.close()
