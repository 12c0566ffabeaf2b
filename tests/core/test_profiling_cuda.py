"""On CUDA: per-kernel device times from ``--profile`` agree with torch.profiler's own kernel
durations for the same compiled function (within 5%)."""
from __future__ import annotations

import statistics

import pytest
import torch

from thundervis.compiler.backend import jit, reset_graph_ids
from thundervis.compiler.observer import CompileObserver
from thundervis.compiler.profiling import ProfileSettings

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


class Timings(CompileObserver):
    def __init__(self):
        self.data = []
        self.walls = []

    def runtime(self, graph, chain, event, data):
        if event == "timings":
            self.data.append(data)
        elif event == "walls":
            self.walls.append(data)


def g(x, w):
    return torch.tanh(x @ w + 1.0) * 0.5 + x


def test_device_times_within_5_percent_of_torch_profiler():
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Timings()
    steps = 5
    cf = jit(g, observer=obs, profile=ProfileSettings(warmup=3, steps=steps))
    x = torch.randn(4096, 4096, device="cuda")
    w = torch.randn(4096, 4096, device="cuda") / 64
    for _ in range(3 + steps):
        cf(x, w)
    torch.cuda.synchronize()
    (data,) = obs.data
    assert data["clock"] == "device" and data["calls"] == steps
    ours = sorted((s["median_us"] for s in data["symbols"]), reverse=True)

    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            cf(x, w)
        torch.cuda.synchronize()
    by_name: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            by_name.setdefault(e.name, []).append(e.device_time)
    theirs = sorted((statistics.median(v) for v in by_name.values() if len(v) == steps), reverse=True)
    # The kernels that matter (matmul, the fused pointwise kernel) line up by size.
    big = [t for t in theirs if t > 20.0]
    assert big, theirs
    for mine, ref in zip(ours, big):
        assert mine == pytest.approx(ref, rel=0.05), (ours, theirs)
    # The profiled calls above were the untimed ones after the timed calls: their wall time,
    # synchronized, holds the kernels' device time.
    (walls,) = obs.walls
    assert walls["clock"] == "device" and walls["calls"] == steps and len(walls["walls_us"]) == steps
    assert statistics.median(walls["walls_us"]) >= 0.95 * data["step"]["median_us"], (walls, data["step"])
