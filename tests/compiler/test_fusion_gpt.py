"""examples/train_gpt.py with the Triton executor named (so its kernels run in Triton's interpreter
on CPU, not the default executors' fast CPU path): losses equal eager, and at least 80% of the
non-matmul prims run inside fusions."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.fusion_stats import FusionStats

STEPS = 2
SIZE = dict(batches=2, batch_size=2, block_size=16, n_embd=32, n_head=2, n_layer=1)

pytestmark = pytest.mark.filterwarnings("error:thundervis. Triton kernel")


@pytest.fixture(scope="module")
def gpt_fused(example, tmp_path_factory):
    import os
    os.environ.setdefault("THUNDERVIS_CACHE_DIR", str(tmp_path_factory.mktemp("tvcache")))
    tg = example("train_gpt")
    eager = tg.train(*tg.build(0, **SIZE), STEPS)
    torch._dynamo.reset()
    reset_graph_ids()
    stats = FusionStats()
    compiler = ThundervisCompiler(executors=["triton", "torch"], observer=stats)  # the interpreter runs
    losses = tg.train(*tg.build(0, **SIZE), STEPS, lambda m: torch.compile(m, backend=compiler))
    torch._dynamo.reset()
    return eager, losses, stats


def test_gpt_losses_match_eager(gpt_fused):
    eager, losses, stats = gpt_fused
    assert not stats.failures, stats.failures[0][2]
    assert len(losses) == STEPS
    for e, c in zip(eager, losses):
        assert abs(e - c) <= 1e-4 * abs(e), (eager, losses)


def test_gpt_fusion_share_at_least_80_percent(gpt_fused):
    _, _, stats = gpt_fused
    fused, total = stats.share()
    assert total > 100
    assert fused / total >= 0.8, (fused, total, stats.unfused())
    chains = {c for _, c in stats.traces}
    assert {"forward", "backward"} <= chains


def test_gpt_kernel_records_cover_forward_and_backward_lines(gpt_fused):
    _, _, stats = gpt_fused
    assert stats.kernels and all(k.executor == "triton" for k in stats.kernels)
    directions = {line.direction for k in stats.kernels for line in k.source_lines}
    assert directions == {"forward", "backward"}
    files = {line.file.rsplit("/", 1)[-1] for k in stats.kernels for line in k.source_lines}
    assert "train_gpt.py" in files
    names = [k.name for k in stats.kernels]
    assert len(names) == len(set(names))  # forward and backward kernels are named apart
    # backward kernels point at the forward lines they differentiate (e.g. the softmax line)
    bw = [line.code for k in stats.kernels for line in k.source_lines if line.direction == "backward"]
    assert any("softmax" in code for code in bw)
