"""Saved-for-backward bytes of one training step: eager, Inductor and thundervis side by side.

Counted from outside with ``torch.autograd.graph.saved_tensors_hooks`` (distinct storages, the
model's parameters and buffers excluded; see ``_memory_models.saved_bytes``), never with our own
ledger. Each model (GPT-2-, Llama- and BERT-like, from ``transformers`` configs, random init) runs
eager, ``torch.compile`` (Inductor) and thundervis with each ``--remat`` policy in one process.
Prints MB and the ratio to Inductor (target <= 1.0x, goal 0.9x for ``remat=auto``), and, with
``--ledger``, checks that the recorded ledger's total equals the measured bytes exactly.
Usage: ``python benchmarks/saved_memory.py [--models gpt2,llama,bert] [--layers N] [--remat off,auto]
[--no-inductor] [--ledger]``.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _memory_models import LAYERS, build, saved_bytes, step  # noqa: E402

TARGET, GOAL = 1.0, 0.9


def _thundervis(model, remat: str, path):
    """Return (compiled model, observer or None): compiled through thundervis with ``remat``,
    recorded to ``path`` when given."""
    from thundervis.compiler import ThundervisCompiler
    observer = None
    if path is not None:
        from thundervis.recording import RecordingObserver
        observer = RecordingObserver(path)
    backend = ThundervisCompiler(observer=observer, remat=remat)
    return torch.compile(model, backend=backend, dynamic=False), observer


def measure(name: str, layers: int, remats: list[str], inductor: bool, ledger: bool) -> dict:
    """Return {column: (bytes, tensors)} for one model, plus "ledger <remat>" totals when asked."""
    torch._dynamo.reset()
    model, batch = build(name, layers=layers)
    out = {"eager": saved_bytes(model, model, batch)}
    if inductor:
        m = copy.deepcopy(model)
        run = torch.compile(m, dynamic=False)
        step(run, m, batch)  # compile outside the hooks
        out["inductor"] = saved_bytes(run, m, batch)
    for remat in remats:
        torch._dynamo.reset()
        m = copy.deepcopy(model)
        path = os.path.join(tempfile.mkdtemp(), f"{name}-{remat}.tvrec") if ledger else None
        run, observer = _thundervis(m, remat, path)
        step(run, m, batch)
        out[f"thundervis {remat}"] = saved_bytes(run, m, batch)
        if observer is not None:
            observer.close()
            out[f"ledger {remat}"] = ledger_total(path)
    return out


def ledger_total(path: str) -> tuple[int, int]:
    """Return (saved bytes, tensors) per step from the recording's memory ledger."""
    from thundervis.present.memory import memory_report
    from thundervis.recording import open_recording
    report = memory_report(open_recording(path))
    return report.saved_bytes, report.saved_tensors


def main() -> int:
    """Measure and print; return 0 when every target is met (and the ledgers agree), 1 otherwise."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt2,llama,bert")
    p.add_argument("--layers", type=int, default=LAYERS)
    p.add_argument("--remat", default="off,auto", help="the thundervis policies to run, comma-separated")
    p.add_argument("--no-inductor", action="store_true", help="skip Inductor (no target then)")
    p.add_argument("--ledger", action="store_true", help="record each run and compare the ledger's total")
    args = p.parse_args()
    remats = [r.strip() for r in args.remat.split(",") if r.strip()]
    ok = True
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        res = measure(name, args.layers, remats, not args.no_inductor, args.ledger)
        ind = res.get("inductor", (0, 0))[0]
        print(f"{name} ({args.layers} layers)")
        for col, (nbytes, n) in res.items():
            ratio = f"{nbytes / ind:5.2f}x Inductor" if ind else ""
            verdict = ""
            if col.startswith("thundervis") and ind and col.endswith("auto"):
                met = nbytes <= TARGET * ind
                ok = ok and met
                verdict = f"  (target <= {TARGET}x, goal {GOAL}x) {'OK' if met else 'MISSED'}"
            if col.startswith("ledger"):
                measured = res[col.replace("ledger", "thundervis")][0]
                same = nbytes == measured
                ok = ok and same
                verdict = f"  {'== measured' if same else f'!= measured ({nbytes - measured:+d} B)'}"
            print(f"  {col:16s} {nbytes / 1e6:8.3f} MB  {n:4d} storages  {ratio}{verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
