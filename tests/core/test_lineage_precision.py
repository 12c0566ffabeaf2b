"""Lineage of a source line in a residual model (like examples/train_gpt.py): AOTAutograd gives
every backward op that merely accumulates gradients one shared ``seq_nr``, so linking by
``seq_nr`` alone pulled every fusion holding one of those adds into the lineage of any line."""
from __future__ import annotations

import os

import pytest

from thundervis.recording import lineage_of_source, open_recording

from core_helpers import line_of

SCRIPT = """\
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + torch.tanh(self.attn(self.ln1(x)))  # LINE_ATTN
        return x + self.mlp(self.ln2(x))  # LINE_MLP

class Decoder(nn.Module):
    def __init__(self, d=16, layers=2):
        super().__init__()
        self.emb = nn.Embedding(32, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, 32)

    def forward(self, idx):
        x = self.emb(idx)  # LINE_EMB
        for b in self.blocks:
            x = b(x)
        return nn.functional.cross_entropy(self.head(x).view(-1, 32), idx.view(-1))  # LINE_LOSS

torch.manual_seed(0)
model = torch.compile(Decoder())
model(torch.randint(0, 32, (2, 8))).backward()
"""


@pytest.fixture(scope="module")
def decoder_run(tmp_path_factory):
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("decoder")
    script = os.path.join(str(folder), "decoder.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(str(folder), "d.tvrec")),
                        executors=["triton", "torch"])
    assert result.exit_code == 0
    return result.path, script


@pytest.mark.parametrize("marker", ["LINE_MLP", "LINE_ATTN", "LINE_EMB"])
def test_backward_lineage_stays_on_the_line(decoder_run, marker):
    path, script = decoder_run
    line = line_of(script, marker)
    with open_recording(path) as rec:
        (lin,) = lineage_of_source(rec, "decoder.py", line)
        bw_all = {k.name for k in rec.graph(lin.graph).kernels if k.chain == "backward"}
    bw = next(c for c in lin.chains if c.chain == "backward")
    acquired = bw.steps[0].symbols
    assert acquired, "the backward ops of the line are found"
    assert {s.source.line for s in acquired if s.source is not None} == {line}, \
        "a backward op of another line (a gradient-accumulating add) was pulled in"
    ended = {e.kernel.name for e in bw.ends if e.kernel is not None}
    assert ended < bw_all, "the line's lineage must not end in every backward kernel"


def test_shared_seq_nr_exists_in_the_model(decoder_run):
    """The case the fix is for: several backward adds of different lines share one seq_nr."""
    path, _ = decoder_run
    with open_recording(path) as rec:
        adds = [s for s in rec.symbols(0, "backward", 0) if s.sym == "aten.add.Tensor" and s.seq_nr is not None]
    by_nr: dict = {}
    for s in adds:
        by_nr.setdefault(s.seq_nr, set()).add(s.source.line if s.source else None)
    assert any(len(lines) > 1 for lines in by_nr.values())
