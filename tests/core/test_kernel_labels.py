"""Every view names what ran where with the GPU target: one owner, ``present.status.kernel_label``
(``fw_fusion_0 [triton sm_90 · ran on cpu via torch]``), reached through the kernel rows the TUI
and the widget read."""
from __future__ import annotations

from roofline_fixtures import roofline_recording

from thundervis.present.overview import read_overview
from thundervis.present.status import KernelRun, built_targets, kernel_label, kernel_tag
from thundervis.recording import open_recording


def test_label_names_executor_targets_and_what_ran_it():
    run = KernelRun("cpu", "torch", True)
    assert kernel_label("fw_fusion_3", "triton", run, ["sm_80", "sm_90"]) == \
        "fw_fusion_3 [triton sm_80 sm_90 · ran on cpu via torch]"
    assert kernel_tag("triton", None, ["sm_90"]) == "triton sm_90"
    assert kernel_label("fw_fusion_3", "triton") == "fw_fusion_3 [triton]"


def test_kernel_rows_carry_the_targets_built(tmp_path):
    with open_recording(roofline_recording(str(tmp_path / "b.tvrec"), build=True)) as rec:
        assert built_targets(rec) == {(0, "forward", "fw_fusion_0"): ("sm_90",)}
        (row,) = read_overview(rec).kernels
        assert row.targets == ("sm_90",) and row.label == "fw_fusion_0 [triton sm_90]"
        assert row.as_json()["label"] == row.label and row.as_json()["tag"] == "triton sm_90"
    with open_recording(roofline_recording(str(tmp_path / "n.tvrec"))) as rec:
        (row,) = read_overview(rec).kernels
        assert row.targets == () and row.label == "fw_fusion_0 [triton]"


def test_a_kernel_built_for_gpu_targets_says_which_device_its_note_plans_for():
    """The recorded kernel (and its note: "4 dependent phases run by one program") is planned for
    the run's device; each target's build is planned apart, so with targets the note is headed by
    that device and never reads as the sm_90 plan."""
    from thundervis.present.status import plan_note
    note = "inputs read in place; 4 dependent phases run by one program"
    run = KernelRun("cpu", "torch", True)
    assert plan_note(note, run, ("sm_90",)) == f"cpu plan: {note}"
    assert plan_note(note, run, ()) == note  # nothing else planned: nothing to tell apart
    assert plan_note(note, None, ("sm_90",)) == note  # device not recorded: not guessed
    assert plan_note(None, run, ("sm_90",)) is None
