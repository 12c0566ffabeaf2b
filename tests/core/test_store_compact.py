"""What a recording stores, once: kernels (code and region IR in their columns only, also after
packing older recordings) and compact pass storage (compressed texts, read back identically)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

import kernel_fixtures as kf
from thundervis.recording import open_recording
from thundervis.recording.schema import KERNEL_COLUMN_KEYS


def _kernel_recording(folder) -> str:
    record = kf.kernel_record(kf.region_trace("cpu", "triton_fusion_0"))
    record["launch_grid"] = [4, 1, 1]  # an executor detail: it has no column
    return kf.make_recording(os.path.join(str(folder), "rank-00000.tvrec"), [(0, "forward", record)])


def _records(path: str) -> list[dict]:
    conn = sqlite3.connect(path)
    try:
        return [json.loads(r) for (r,) in conn.execute("SELECT record FROM kernels")]
    finally:
        conn.close()


def test_a_kernel_is_stored_once(tmp_path):
    path = _kernel_recording(tmp_path)
    (record,) = _records(path)
    assert record == {"launch_grid": [4, 1, 1]}  # no code, no region IR, no column repeated
    with open_recording(path) as rec:
        (k,) = rec.kernels()
        src = rec.kernel_source(k)
        assert src.code.startswith("# generated code") and json.loads(src.trace_json)["symbols"]
        assert k.members and k.inputs and k.source_lines


def test_packing_drops_the_region_ir_an_older_record_repeats(tmp_path):
    """Packing used to pop ``region``/``trace_json`` while the record's key is ``trace``: the IR
    survived packing. An older recording's full record loses every column it repeats."""
    from thundervis.recording.group_store import pack_group
    group = tmp_path / "job.tvgroup"
    group.mkdir()
    path = _kernel_recording(group)
    full = kf.kernel_record(kf.region_trace("cpu", "triton_fusion_0"))
    full["launch_grid"] = [4, 1, 1]
    conn = sqlite3.connect(path)
    conn.execute("UPDATE kernels SET record = ?", (json.dumps(full),))  # as schema 2 wrote it
    conn.commit()
    conn.close()
    assert "trace" in _records(path)[0]
    packed, left = pack_group(str(group))
    assert packed == 1
    (record,) = _records(path)
    assert not KERNEL_COLUMN_KEYS & record.keys(), sorted(record)
    assert record == {"launch_grid": [4, 1, 1]}
    with open_recording(path) as rec:  # the IR is still there, once, in the group store
        (k,) = rec.kernels()
        assert json.loads(rec.kernel_source(k).trace_json)["symbols"]
