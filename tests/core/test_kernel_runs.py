"""What ran each kernel, where: the ``kernel_path`` events a run records, read by
``present.kernel_runs`` and said by every view (``ls`` text and JSON, ``show``, the TUI and the
widget's kernel tables)."""
from __future__ import annotations

import json
import os

import pytest
import torch

from core_helpers import run_cli, write_script
from thundervis.present.status import (KernelRun, clock_label, kernel_label, kernel_runs, ran_on_text,
                                            run_from_event)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """A run of a small script with the default executors (no CUDA: the fast CPU path)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("ranon")
    script = write_script(folder, "train_ranon.py", """
        for _ in range(2):
            model(torch.randn(4, 8)).backward()
    """)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(str(folder), "r.tvrec")))
    assert result.exit_code == 0, result
    return result.path


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fast CPU path is for machines without CUDA")
def test_a_default_cpu_run_records_that_its_fusions_ran_on_cpu_via_torch(default_run, capsys):
    from thundervis.recording import open_recording
    with open_recording(default_run) as rec:
        runs = kernel_runs(rec.events())
        kernels = rec.kernels()
    assert kernels
    for k in kernels:
        run = runs[(k.graph, k.chain, k.name)]
        assert (run.device, run.via, run.measured) == ("cpu", "torch", True)
        assert run.torch_us is not None and run.torch_us > 0
    code, out, _ = run_cli(capsys, "ls", "--json", default_run)
    assert code == 0
    fusions = [f for g in json.loads(out)["graphs"] for f in g["fusions"]]
    assert fusions and all(f["ran_on"]["text"] == "ran on cpu via torch" for f in fusions)
    code, out, _ = run_cli(capsys, "ls", default_run)
    assert f"fusion {kernels[0].name} [triton · ran on cpu via torch]" in out
    code, out, _ = run_cli(capsys, "show", default_run, "--chain", "forward")
    assert code == 0 and "ran on cpu via torch" in out


def test_labels():
    run = KernelRun("cpu", "torch", True, 12.0, None, "")
    assert kernel_label("fw_fusion_3", "triton", run, ["sm_90"]) == "fw_fusion_3 [triton sm_90 · ran on cpu via torch]"
    assert kernel_label("fw_fusion_3", "triton") == "fw_fusion_3 [triton]"
    assert ran_on_text(KernelRun("cpu", "triton-interpreter")) == "runs on cpu via triton-interpreter"
    assert ran_on_text(None) == ""
    assert clock_label("cpu", "host") == "CPU" and clock_label("cuda:0", "host") == "CPU"
    assert clock_label("cuda:0", "device") == "GPU"


def test_events_are_validated():
    assert run_from_event("nope") is None and run_from_event({"via": "torch"}) is None
    run = run_from_event({"kernel": "k", "device": "[red]gpu", "via": "magic", "torch_us": -3,
                          "inductor_us": "fast", "why": 7, "planned": False})
    assert (run.device, run.via, run.torch_us, run.inductor_us, run.why, run.measured) == \
        ("unknown", "unknown", None, None, "", True)


class _Rec:
    def __init__(self, events):
        self._events = events

    def events(self, name=None):
        from thundervis.recording.model import Event
        return [Event(g, c, e, d, 0.0) for g, c, e, d in self._events if name is None or e == name]


def test_the_last_measured_event_wins_and_a_runtime_fallback_means_torch():
    rec = _Rec([(0, "forward", "kernel_path", {"kernel": "a", "device": "cpu", "via": "torch", "planned": True}),
                (0, "forward", "kernel_path", {"kernel": "a", "device": "cpu", "via": "inductor", "planned": False}),
                (0, "forward", "kernel_path", {"kernel": "b", "device": "cpu", "via": "triton-interpreter",
                                               "planned": True}),
                (0, "forward", "kernel_fallback", {"kernel": "b", "error": "boom"})])
    runs = kernel_runs(rec.events())
    assert runs[(0, "forward", "a")].via == "inductor"
    b = runs[(0, "forward", "b")]
    assert (b.device, b.via, b.measured) == ("cpu", "torch", True) and "boom" in b.why


def test_ls_label_is_the_kernel_tables(default_run, capsys):
    """``ls`` (text and JSON) names each fusion by present's kernel table row: no label of its own."""
    from thundervis.present.kernel_rows import kernel_table
    from thundervis.recording import open_recording
    with open_recording(default_run) as rec:
        rows = {r.id: r for r in kernel_table(rec)}
    code, out, _ = run_cli(capsys, "ls", "--json", default_run)
    fusions = [f for g in json.loads(out)["graphs"] for f in g["fusions"]]
    assert code == 0 and fusions
    for f in fusions:
        row = rows[f["id"]]
        assert (f["label"], f["tag"], f["ran_in_torch"]) == (row.label, row.tag, row.fallback)
        assert f["ran_on"] == (row.run.as_json() if row.run else None)
    code, text, _ = run_cli(capsys, "ls", default_run)
    assert all(f"fusion {r.label} {r.chain}" in text for r in rows.values())


def test_a_kernel_whose_inputs_arrive_in_another_layout_says_it_copies_them(tmp_path, capsys):
    """Fake tensors can give an op other strides than its real kernel: CPU attention's outputs,
    saved for the backward, arrive dense where the trace recorded slices of one buffer. The Triton
    launcher copies them into the recorded layout on every call; the run records which, and every
    view's label says so (a cost a person would otherwise never see)."""
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    from thundervis.present.kernel_rows import kernel_table
    from thundervis.recording import RecordingObserver, open_recording
    B, T, H, D = 2, 8, 4, 8
    torch.manual_seed(0)
    lin = torch.nn.Linear(H * D, 3 * H * D)

    def f(x):
        q, k, v = lin(x).split(H * D, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (y.transpose(1, 2).reshape(B, T, H * D) * 2).tanh().sum()
    path = str(tmp_path / "copied.tvrec")
    rec = RecordingObserver(path)
    rec.start_run(script="t.py", module=None, argv=["t.py"], cwd=str(tmp_path), executors=["triton", "torch"])
    torch._dynamo.reset()
    reset_graph_ids()
    x = torch.randn(B, T, H * D, requires_grad=True)
    torch.compile(f, backend=ThundervisCompiler(executors=["triton", "torch"], observer=rec))(x).backward()
    got, x.grad = x.grad, None
    f(x).backward()
    torch.testing.assert_close(got, x.grad)  # copied, not fallen back: the kernels ran and match eager
    rec.finish_run("ok", 0)
    rec.close()
    with open_recording(path) as r:
        runs = kernel_runs(r.events())
        rows = kernel_table(r)
    copying = {k: v for k, v in runs.items() if v.copied}
    assert copying and all(v.measured and v.via == "triton-interpreter" and not v.fell_back
                           for v in copying.values())
    (graph, chain, name), run = next(iter(copying.items()))
    assert ran_on_text(run) == (f"ran on cpu via triton-interpreter, copying {', '.join(run.copied)} "
                                "into the recorded layout each call")
    assert any(r.run is not None and r.run.copied and "into the recorded layout each call" in r.label for r in rows)
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0 and "into the recorded layout each call" in out


def test_copied_input_names_are_validated():
    run = run_from_event({"kernel": "k", "device": "cuda", "via": "triton", "planned": False,
                          "copied_inputs": [{"name": "t3"}, {"name": "\x1b[2J<b>"}, {"name": 7}, "t4",
                                            {"name": "x" * 41}]})
    assert run.copied == ("t3",)
    assert ran_on_text(run) == "ran on cuda via triton, copying t3 into the recorded layout each call"
    assert run_from_event({"kernel": "k", "copied_inputs": {"name": "t3"}}).copied == ()
    many = run_from_event({"kernel": "k", "device": "cuda", "via": "triton", "planned": False,
                           "copied_inputs": [{"name": f"t{i}"} for i in range(5)]})
    assert ran_on_text(many).endswith("copying t0, t1, t2 and 2 more into the recorded layout each call")
