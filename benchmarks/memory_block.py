"""The memory ledger of one GPT-2-medium-shaped transformer block against Korthikanti et al. (2022):
34·s·b·h + 5·a·s²·b bytes per layer in 16-bit with dropout (docs/memory.md derives the variants).

Builds a one-layer GPT-2 (h=1024, a=16) in bfloat16, dropout off, compiles one training step through
thundervis with each ``--remat`` policy and each attention implementation (``sdpa``, ``eager``), and
prints the saved bytes the ledger records for the block (module ``transformer.h.0``) beside the
formulas, in units of s·b·h. Usage: ``python benchmarks/memory_block.py [--seq S] [--batch B]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

H, A = 1024, 16


def step_ledger(model, kwargs: dict, remat: str, name: str, abstract: bool = False):
    """Return the memory report (``present.memory``) of one training step (``model(**kwargs).loss``,
    backward) compiled through thundervis with ``remat``: the torch executor, or with ``abstract``
    the abstract run's planning executors (call it inside ``compiler.abstract.abstract_session``)."""
    from thundervis.compiler import ThundervisCompiler
    from thundervis.present.memory import memory_report
    from thundervis.recording import RecordingObserver, open_recording
    torch._dynamo.reset()
    path = os.path.join(tempfile.mkdtemp(), f"{name}-{remat}.tvrec")
    obs = RecordingObserver(path)
    backend = ThundervisCompiler(executors=None if abstract else ["torch"], observer=obs, remat=remat,
                                 abstract=abstract)
    torch.compile(model, backend=backend, dynamic=False)(**kwargs).loss.backward()
    obs.close()
    return memory_report(open_recording(path))


def print_saved(report, prefix: str, unit: int) -> None:
    """Print the counted saved tensors of the modules under ``prefix`` in bytes / ``unit``."""
    for sv in [x for x in report.saved if x.counted and x.module.startswith(prefix)]:
        print(f"        {sv.storage_bytes / unit:6.3f}  {sv.dtype:<9} {list(sv.shape)}  {sv.op}  {sv.module}  "
              f"{sv.code.strip()[:60]}")


def block_ledger(attn: str, remat: str, seq: int, batch: int):
    """Return the memory report (``present.memory``) of one training step of the one-layer model."""
    from model_zoo import import_torchvision
    import_torchvision()
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=256, n_embd=H, n_layer=1, n_head=A, n_positions=seq, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation=attn)
    model = transformers.GPT2LMHeadModel(cfg).to(torch.bfloat16).train()
    ids = torch.randint(0, 256, (batch, seq))
    return step_ledger(model, {"input_ids": ids, "labels": ids}, remat, f"block-{attn}")


def main() -> int:
    """Print the table; return 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args()
    s, b = args.seq, args.batch
    sbh = s * b * H
    print(f"GPT-2-medium-shaped block: h={H} a={A} s={s} b={b}, bfloat16; s·b·h = {sbh} (bytes are /s·b·h)")
    print(f"Korthikanti with dropout     34 + 5as/h  = {34 + 5 * A * s / H:7.2f}")
    print(f"without dropout              32 + 2as/h  = {32 + 2 * A * s / H:7.2f}")
    print(f"without dropout, SDPA        32 + 4a/h   = {32 + 4 * A / H:7.2f}  (fp32 logsumexp: 4·a·s·b bytes)")
    for attn in ("eager", "sdpa"):
        for remat in ("off", "auto"):
            r = block_ledger(attn, remat, s, b)
            block = sum(g.bytes for g in r.by_module if g.label.startswith("transformer.h.0"))
            print(f"ledger attn={attn:<5} remat={remat:<4}  block {block / sbh:7.2f}   whole step {r.saved_bytes / sbh:7.2f}")
            for g in r.by_module:
                print(f"    {g.bytes / sbh:7.3f}  {g.tensors:3d}  {g.label}")
            print_saved(r, "transformer.h.0", sbh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
