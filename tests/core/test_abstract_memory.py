"""The static peak of an abstract run is the GPU kernels' (issue 39): no fusion's op-by-op CPU
intermediates, which the stand-in CPU device would otherwise imply (compiler/ledger.region_scratch)."""
from __future__ import annotations

import torch


def _peaks(path):
    """Return (the recorded step peak, parameters + the highest live bytes of any chain's final trace,
    the most any op's CPU-path scratch adds to its live bytes in those traces)."""
    from thundervis.compiler import ledger
    from thundervis.present.memory import memory_report
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        report = memory_report(rec)
        live = scratch = 0
        for chain in rec.overview().graphs[0].chains:
            if chain.kind in ("forward", "backward"):
                t = rec.pass_trace(chain.passes[-1])
                rows = ledger.timeline(t, [p.name for p in t.inputs] if chain.kind == "backward" else [])
                live = max(live, max(r["live_bytes"] for r in rows))
                scratch = max(scratch, max(r["transient_bytes"] - r["live_bytes"] for r in rows))
    return report.peak_bytes, report.parameters + live, scratch


class _Mlp(torch.nn.Module):
    """An MLP whose activation is several ATen ops: one fusion whose intermediates the CPU path
    would hold at once (a single decomposed op, such as GELU, runs as one call and holds none)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)

    def forward(self, x):
        h = self.fc1(x)
        a = h * torch.sigmoid(h)
        return self.fc2(a * a + h)


def test_abstract_peak_has_no_cpu_region_scratch(tmp_path):
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.abstract import Placeholders, abstract_session
    from thundervis.recording import RecordingObserver
    torch._dynamo.reset()
    path = str(tmp_path / "a.tvrec")
    obs = RecordingObserver(path)
    with abstract_session(Placeholders()):
        model = _Mlp().cuda()
        run = torch.compile(model, backend=ThundervisCompiler(observer=obs, abstract=True), dynamic=False)
        run(torch.randn(128, 64, device="cuda")).pow(2).mean().backward()
    obs.close()
    torch._dynamo.reset()
    recorded, live, scratch = _peaks(path)
    assert scratch > 0, "outside a session the ledger would count the CPU path's intermediates"
    assert recorded == live


def test_an_abstract_run_for_the_cpu_keeps_the_cpu_paths_region_scratch(tmp_path):
    """With ``--device cpu`` the fusions do run op by op on the CPU: their intermediates stay in."""
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.abstract import Placeholders, abstract_session
    from thundervis.recording import RecordingObserver
    torch._dynamo.reset()
    path = str(tmp_path / "a.tvrec")
    obs = RecordingObserver(path)
    with abstract_session(Placeholders(), gpu_visible=False):
        run = torch.compile(_Mlp(), backend=ThundervisCompiler(observer=obs, abstract=True), dynamic=False)
        run(torch.randn(128, 64)).pow(2).mean().backward()
    obs.close()
    torch._dynamo.reset()
    recorded, live, scratch = _peaks(path)
    assert scratch > 0 and recorded > live
