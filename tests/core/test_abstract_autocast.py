"""CUDA autocast in an abstract run (issue 39): ``torch.autocast("cuda", ...)`` acts on the CPU stand-ins
as it would on the GPU (CUDA's op lists included), and GradScaler keeps working."""
from __future__ import annotations

import textwrap

import pytest

from thundervis.cli import main
from thundervis.recording import open_recording

SCRIPT = """
import sys
import torch, torch.nn as nn

mode = sys.argv[1]
model = nn.Sequential(nn.Linear(64, 256, bias=False), nn.ReLU(), nn.Linear(256, 64, bias=False)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda") if mode == "bf16" else torch.cuda.amp.GradScaler()
step = torch.compile(model)
x = torch.randn(512, 64, device="cuda")
if mode == "fp16":
    ctx = torch.cuda.amp.autocast()
else:
    ctx = torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16")
with ctx:
    y = step(x)
    loss = y.float().pow(2).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
print("dtype", y.dtype)
"""


def _run(tmp_path, mode: str, capsys):
    """Run the script abstractly in ``mode``; return (the recording's path, what it printed)."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip("\n"))
    rec = str(tmp_path / f"{mode}.tvrec")
    assert main(["run", "--abstract", "--no-view", "-o", rec, str(script), mode]) == 0
    return rec, capsys.readouterr().out


def _matmul_dtypes(rec) -> set:
    """The dtypes of every matmul result in the final forward and backward traces."""
    g = rec.overview().graphs[0]
    out = set()
    for chain in g.chains:
        if chain.kind in ("forward", "backward"):
            for b in rec.pass_trace(chain.passes[-1]).walk():
                if b.sym == "prims.mm":
                    out |= {p.dtype for p in b.flat_outputs()}
    return out


@pytest.mark.slow
def test_cuda_autocast_gives_low_precision_matmuls_and_activations(tmp_path, capsys):
    from thundervis.present.abstract_fit import abstract_answer
    from thundervis.present.memory import memory_report
    seen = {}
    for mode in ("bf16", "off", "fp16"):
        path, out = _run(tmp_path, mode, capsys)
        with open_recording(path) as rec:
            seen[mode] = (_matmul_dtypes(rec), memory_report(rec).saved_bytes, abstract_answer(rec), out)
    assert seen["bf16"][0] == {"bfloat16"} and "dtype torch.bfloat16" in seen["bf16"][3]
    assert seen["off"][0] == {"float32"} and "dtype torch.float32" in seen["off"][3]
    assert seen["fp16"][0] == {"float16"}  # torch.cuda.amp.autocast(): CUDA's default dtype
    # Saved for the backward: x [512, 64] and the ReLU output [512, 256], in 2 bytes instead of 4.
    assert seen["off"][1] == (512 * 64 + 512 * 256) * 4
    assert seen["bf16"][1] == seen["fp16"][1] == (512 * 64 + 512 * 256) * 2
    answer_bf16, answer_off = seen["bf16"][2], seen["off"][2]
    assert answer_bf16.activations < 0.6 * answer_off.activations
    # GradScaler (both spellings) ran scale/step/update: AdamW made its state from the gradients.
    assert answer_bf16.optimizer == "AdamW" and answer_bf16.optimizer_state == 2 * answer_bf16.parameters
    assert answer_bf16.parameters == (64 * 256 * 2) * 4  # the parameters stay fp32 under autocast


def test_autocast_mapping_is_undone_after_the_session():
    import torch
    from thundervis.compiler.abstract import Placeholders, abstract_session
    real = torch.amp.autocast_mode.autocast.__init__
    with abstract_session(Placeholders()):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):
            assert not torch.is_autocast_enabled("cpu")
    assert not torch.is_autocast_enabled("cpu")
    assert torch.amp.autocast_mode.autocast.__init__ is real  # outside an abstract run, torch's own again
    with abstract_session(Placeholders(), gpu_visible=False):  # --device cpu: the script sees no GPU
        assert torch.amp.autocast_mode.autocast.__init__ is real


def test_cpu_autocast_takes_cudas_op_lists_in_the_session():
    import torch
    import torch.nn.functional as F
    from thundervis.compiler.abstract import Placeholders, abstract_session

    def dtypes():
        xb, x = torch.randn(4, 8).bfloat16(), torch.randn(4, 8)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return {"mm": torch.mm(x, x.t()).dtype, "softmax": F.softmax(xb, -1).dtype,
                    "log_softmax": F.log_softmax(xb, -1).dtype, "layer_norm": F.layer_norm(xb, (8,)).dtype,
                    "exp": xb.exp().dtype, "pow": xb.pow(2).dtype, "rsqrt": xb.abs().rsqrt().dtype,
                    "sum": xb.sum().dtype, "sum_dim": xb.sum(-1).dtype,
                    "softmax_asked": F.softmax(xb, -1, dtype=torch.bfloat16).dtype,
                    "mv": torch.mv(x, x[0]).dtype, "dot": torch.dot(x[0], xb[0]).dtype,
                    "silu": F.silu(xb).dtype, "sum_int": torch.ones(3, dtype=torch.long).sum().dtype}
    with abstract_session(Placeholders()):
        got = dtypes()
    f32, b16 = torch.float32, torch.bfloat16
    # CUDA's lists (aten/src/ATen/autocast_mode.h): lower precision, fp32, fp32 output unless asked, promote
    assert got == {"mm": b16, "softmax": f32, "log_softmax": f32, "layer_norm": f32, "exp": f32, "pow": f32,
                   "rsqrt": f32, "sum": f32, "sum_dim": f32, "softmax_asked": b16, "mv": b16, "dot": f32,
                   "silu": b16, "sum_int": torch.long}
    with torch.autocast("cpu", dtype=torch.bfloat16):  # after the session, CPU autocast's own lists again
        assert F.softmax(torch.randn(4, 8).bfloat16(), -1).dtype == b16
        assert torch.mv(torch.randn(4, 8), torch.randn(8)).dtype == f32


def test_a_promote_op_on_bf16_beside_fp16_raises_as_cuda_does():
    """CUDA autocast's ``promote`` takes float32 over the low type and raises on bf16 beside fp16
    (at::autocast::prioritize); the abstract run's CPU stand-in must not cast the mix silently."""
    import pytest
    import torch
    from thundervis.compiler.abstract import Placeholders, abstract_session
    a, h, f = torch.randn(4), torch.randn(4).half(), torch.randn(4)
    with abstract_session(Placeholders()):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.addcmul(a.bfloat16(), a.bfloat16(), a.bfloat16()).dtype == torch.bfloat16
            assert torch.addcmul(a.bfloat16(), f, a.bfloat16()).dtype == torch.float32
            with pytest.raises(RuntimeError, match="prioritize"):
                torch.addcmul(a.bfloat16(), h, a.bfloat16())


def test_compiled_softmax_under_cuda_autocast_is_float32_in_the_session():
    import torch
    import torch.nn.functional as F
    from thundervis.compiler.abstract import Placeholders, abstract_session
    torch._dynamo.reset()
    with abstract_session(Placeholders()):
        f = torch.compile(lambda x, w: F.softmax(x @ w, -1), backend="aot_eager")
        x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = f(x, w)
        y.sum().backward()
    assert y.dtype == torch.float32 and x.grad.dtype == torch.float32
    torch._dynamo.reset()
