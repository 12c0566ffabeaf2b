"""A model zoo we did not write: tiny third-party models trained 2 steps under ``thundervis run``.

Usage::

    python benchmarks/model_zoo.py                     # every model, one table row each
    python benchmarks/model_zoo.py --models mistral,resnet18 --json zoo.json

Each model (Mistral, Qwen2, Phi, GPT-2, T5, ViT, DistilBERT, ResNet-18) is built from a ``transformers`` config (random init, no download: HF_HUB_OFFLINE=1) or
from torchvision's own ``torchvision.models.resnet``, with tiny sizes. For each one this script runs
the real CLI in a subprocess, ``thundervis run --no-view --out REC model_zoo.py --train NAME``,
with the DEFAULT executors (on a machine without CUDA: triton under TRITON_INTERPRET=1, then torch).
In that child the script trains a copy of the model eagerly for 2 steps, then the same model compiled
with ``torch.compile`` for 2 steps from the same weights and batch, and writes both loss lists.

Per model the table shows: the largest relative loss difference compiled vs eager over the steps,
forward/backward chains compiled / total (a chain that ran eagerly is not compiled), ATen ops lowered
to prims (``decompose`` pass), prims that run inside fusion kernels, and the fallback reasons (torch
executor notes and chain failures, counted). A row is green when the loss matches within 1e-4
relative at every step and every chain compiled. Exit status 1 when a row is not green.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRITON_INTERPRET", "1")

TOLERANCE = 1e-4
STEPS = 2
HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------------------------------ models
# Each builder returns (model, batch dict of keyword arguments, loss function of the model output).
# Sizes are tiny: under the Triton interpreter every program instance costs about a millisecond.

_TINY_DECODER = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def _tokens(batch: int, seq: int, vocab: int):
    import torch
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    return ids


def _hf_loss(out):
    return out.loss


def _causal_lm(config_cls_name: str, model_cls_name: str, config: dict = _TINY_DECODER, **extra):
    """Return a builder of a tiny ``model_cls_name`` (a transformers causal LM) configured by
    ``config`` updated with ``extra``, with its token batch and loss."""
    def build():
        import transformers
        cfg = getattr(transformers, config_cls_name)(**{**config, **extra})
        model = getattr(transformers, model_cls_name)(cfg)
        ids = _tokens(2, 8, cfg.vocab_size)
        return model, {"input_ids": ids, "labels": ids}, _hf_loss
    return build


# Phi and GPT-2 name their sizes and dropouts their own way (no dropout: compiled == eager).
_phi = _causal_lm("PhiConfig", "PhiForCausalLM", dict(
    vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
    max_position_embeddings=64, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0))
_gpt2 = _causal_lm("GPT2Config", "GPT2LMHeadModel", dict(
    vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


def _t5():
    import torch
    import transformers
    cfg = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0,
                                decoder_start_token_id=0, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(cfg)
    ids = _tokens(2, 8, cfg.vocab_size)
    labels = torch.roll(ids, 1, dims=1)
    return model, {"input_ids": ids, "labels": labels}, _hf_loss


def _distilbert():
    import torch
    import transformers
    cfg = transformers.DistilBertConfig(vocab_size=64, dim=32, hidden_dim=64, n_layers=2, n_heads=4,
                                        max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                                        seq_classif_dropout=0.0, num_labels=3)
    model = transformers.DistilBertForSequenceClassification(cfg)
    ids = _tokens(2, 8, cfg.vocab_size)
    return model, {"input_ids": ids, "labels": torch.tensor([0, 2])}, _hf_loss


def _vit():
    import torch
    import transformers
    cfg = transformers.ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0, num_labels=3)
    model = transformers.ViTForImageClassification(cfg)
    g = torch.Generator().manual_seed(2)
    pixels = torch.randn(2, 3, 16, 16, generator=g)
    return model, {"pixel_values": pixels, "labels": torch.tensor([1, 2])}, _hf_loss


def import_torchvision():
    """Import torchvision and return (module, note). ``note`` is None when it imported as is, else
    one sentence saying what was worked around.

    PyPI's torchvision wheels are built against CUDA torch; beside the CPU torch wheel their C
    extension (``torchvision._C``: nms, roi_align, deform_conv ...) cannot load, and torchvision's
    own import then fails registering a fake kernel for ``torchvision::nms``. The models need none of
    those ops, so when that happens the two operator schemas torchvision registers unconditionally
    are declared (with no kernels: calling them still fails loudly) and torchvision is imported
    again. The model code that runs is torchvision's own.
    """
    try:
        import torchvision
        return torchvision, None
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
        first_error = str(e).splitlines()[0]
    import torch
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "FRAGMENT")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import_torchvision.library = lib  # keep the definitions alive
    import torchvision
    return torchvision, (f"torchvision's C ops cannot load beside this torch ({first_error}); "
                         f"its pure-Python models are used, C ops declared without kernels")


def _resnet18():
    import torch
    torchvision, _ = import_torchvision()
    from torchvision.models import resnet  # torchvision's own model code
    model = resnet.resnet18(weights=None, num_classes=5)
    # Batch 8 at 32x32: the last stage's batch norm then normalizes over 8 values per channel. At
    # batch 2 and 16x16 it normalizes over 2, and float32 rounding (every op matching eager within
    # 1e-5 on its own) grows to a 5e-1 relative loss difference by step 2: a test of conditioning,
    # not of the compiler.
    g = torch.Generator().manual_seed(3)
    images = torch.randn(8, 3, 32, 32, generator=g)
    labels = torch.tensor([1, 4, 0, 2, 3, 3, 1, 0])

    def loss(out):
        return torch.nn.functional.cross_entropy(out, labels)
    return model, {"x": images}, loss


MODELS = {
    "mistral": _causal_lm("MistralConfig", "MistralForCausalLM"),
    "qwen2": _causal_lm("Qwen2Config", "Qwen2ForCausalLM"),
    "phi": _phi,
    "gpt2": _gpt2,
    "t5": _t5,
    "vit": _vit,
    "distilbert": _distilbert,
    "resnet18": _resnet18,
}

# --------------------------------------------------------------------------------- training (child)


def _train(model, batch, loss_fn, steps: int) -> list[float]:
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(**batch))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def train_child(name: str, out_json: str) -> int:
    """Build model ``name``, train an eager copy and a compiled copy for :data:`STEPS` steps from the
    same weights, and write ``{"eager": [...], "compiled": [...], "note": ...}`` to ``out_json``."""
    import torch
    torch.manual_seed(0)
    # transformers imports torchvision when it is installed: make that import work first.
    _, tv_note = import_torchvision()
    note = tv_note if name == "resnet18" else None
    model, batch, loss_fn = MODELS[name]()
    model.train()
    eager_model = copy.deepcopy(model)
    eager = _train(eager_model, batch, loss_fn, STEPS)
    compiled = _train(torch.compile(model), batch, loss_fn, STEPS)
    with open(out_json, "w") as f:
        json.dump({"eager": eager, "compiled": compiled, "note": note}, f)
    return 0


# ------------------------------------------------------------------------------- measuring (parent)

@dataclass
class Row:
    """One model's results."""

    model: str
    ok: bool = False
    max_rel_diff: float | None = None
    losses_eager: list = field(default_factory=list)
    losses_compiled: list = field(default_factory=list)
    chains_compiled: int = 0
    chains_total: int = 0
    ops_lowered: int = 0
    ops_total: int = 0
    prims_fused: int = 0
    prims_total: int = 0
    fallbacks: dict = field(default_factory=dict)
    note: str | None = None
    error: str | None = None
    recording: str | None = None
    # --check-numerics: kernels checked against float64 and those flagged (names)
    numerics_checked: int | None = None
    numerics_flagged: list = field(default_factory=list)


def _reason(note: str) -> str:
    # Group the torch executor's notes by their first reason ("triton: ..."), shapes left out so that
    # one limitation reads as one line.
    first = note.split("; ")[0].strip()
    first = re.sub(r"\[[0-9, ]*\]", "[..]", first)
    return first[:150]


def measure(rec_path: str, row: Row) -> None:
    """Fill ``row``'s chain, lowering, fusion and fallback counts from the recording."""
    from thundervis.compiler.fusion_stats import fused_share
    from thundervis.recording import open_recording
    reasons: Counter = Counter()
    with open_recording(rec_path) as rec:
        for g in rec.graphs():
            for f in g.failures:
                reasons[f"{f.chain or 'graph'} ran eagerly: {f.error.splitlines()[0][:100]}"] += 1
            if any(f.chain is None for f in g.failures):
                row.chains_total += 1  # the whole graph ran eagerly: count it as one chain not compiled
            for c in g.chains:
                if c.kind not in ("forward", "backward", "inference"):
                    continue
                row.chains_total += 1
                if c.status == "compiled" and not any(f.chain == c.kind for f in g.failures):
                    row.chains_compiled += 1
                names = [p.name for p in c.passes]
                if "decompose" in names:
                    dec = rec.pass_trace(g.id, c.kind, c.find_pass("decompose").index)
                    for b in dec.symbols:
                        if b.sym == "del":
                            continue
                        row.ops_total += 1
                        row.ops_lowered += bool(b.sym.startswith("prims.") or b.subsymbols)
                if c.passes and c.passes[-1].name == "codegen":
                    final = rec.pass_trace(g.id, c.kind, c.passes[-1].index)
                    fused, total = fused_share(final)
                    row.prims_fused += fused
                    row.prims_total += total
                    for b in final.symbols:
                        if b.sym == "prims.tensor_constant":
                            reasons["torch: tensor constant (its data is in the trace; torch makes it)"] += 1
                        elif b.executor == "torch" and b.note:
                            reasons[f"torch: {_reason(b.note)}"] += 1
    row.fallbacks = dict(reasons.most_common())
    with open_recording(rec_path) as rec:
        checks = rec.kernel_numerics()
    if checks:
        row.numerics_checked = sum(1 for k in checks if k.verdict != "skipped")
        row.numerics_flagged = [f"{k.kernel} ({k.chain}, {k.max_rel_error:.1e} vs eager {k.eager_rel_error:.1e})"
                                for k in checks if k.flagged]


def run_model(name: str, workdir: str, timeout: float, check_numerics: bool = False) -> Row:
    """Train ``name`` under ``thundervis run`` in a subprocess and return its :class:`Row`
    (``check_numerics``: with ``--check-numerics``, and a flagged kernel makes the row fail)."""
    row = Row(name)
    rec = os.path.join(workdir, f"{name}.tvrec")
    losses = os.path.join(workdir, f"{name}.json")
    for stale in (rec, losses):
        if os.path.exists(stale):
            os.remove(stale)
    cmd = [sys.executable, "-m", "thundervis.cli", "run", "--no-view", "--out", rec,
           *(["--check-numerics"] if check_numerics else []),
           os.path.abspath(__file__), "--train", name, "--losses", losses]  # all after the script is its own
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRITON_INTERPRET": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        row.error = f"timed out after {timeout:.0f} s"
        return row
    row.recording = rec
    if proc.returncode != 0 or not os.path.exists(losses):
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        row.error = f"exit {proc.returncode}: {tail[-1] if tail else 'no output'}"
        if os.path.exists(rec):
            measure(rec, row)
        return row
    with open(losses) as f:
        got = json.load(f)
    row.losses_eager, row.losses_compiled, row.note = got["eager"], got["compiled"], got.get("note")
    row.max_rel_diff = max(abs(c - e) / max(abs(e), 1e-12) for e, c in zip(row.losses_eager, row.losses_compiled))
    measure(rec, row)
    row.ok = (row.max_rel_diff <= TOLERANCE and row.chains_total > 0
              and row.chains_compiled == row.chains_total and len(row.losses_compiled) == STEPS
              and not (check_numerics and (row.numerics_flagged or not row.numerics_checked)))
    return row


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100.0 * a / b:.0f}%)" if b else "0/0"


def print_table(rows: list[Row]) -> None:
    """Print one line per model, then the fallback reasons and notes under it."""
    head = f"{'model':<11} {'':<5} {'loss rel diff':>13}  {'chains':>8}  {'ops lowered':>15}  {'prims fused':>15}"
    print(head)
    print("-" * len(head))
    for r in rows:
        mark = "ok" if r.ok else "FAIL"
        diff = f"{r.max_rel_diff:.1e}" if r.max_rel_diff is not None else "-"
        print(f"{r.model:<11} {mark:<5} {diff:>13}  {r.chains_compiled:>3}/{r.chains_total:<4}  "
              f"{_pct(r.ops_lowered, r.ops_total):>15}  {_pct(r.prims_fused, r.prims_total):>15}")
        if r.error:
            print(f"    error: {r.error}")
        if r.note:
            print(f"    note: {r.note}")
        for reason, n in r.fallbacks.items():
            print(f"    {n:>3} x {reason}")
        if r.numerics_checked is not None:
            print(f"    numerics: {r.numerics_checked} kernels checked against float64, "
                  f"{len(r.numerics_flagged)} flagged")
            for k in r.numerics_flagged:
                print(f"      flagged {k}")
    green = sum(r.ok for r in rows)
    print(f"\n{green} of {len(rows)} models green (loss within {TOLERANCE:g} relative at each of {STEPS} "
          f"steps, every forward/backward chain compiled)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)}")
    p.add_argument("--json", metavar="OUT", help="write every row to OUT as JSON")
    p.add_argument("--keep", metavar="DIR", help="keep the recordings in DIR")
    p.add_argument("--timeout", type=float, default=900, help="seconds per model (default 900)")
    p.add_argument("--check-numerics", action="store_true",
                   help="run with --check-numerics; a model with a flagged kernel is not green")
    p.add_argument("--train", metavar="NAME", help=argparse.SUPPRESS)  # the child, under thundervis run
    p.add_argument("--losses", metavar="OUT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.train:
        return train_child(args.train, args.losses)
    names = [n.strip() for n in args.models.split(",")] if args.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    workdir = args.keep or tempfile.mkdtemp(prefix="thundervis-zoo-")
    os.makedirs(workdir, exist_ok=True)
    rows = []
    for n in names:
        rows.append(run_model(n, workdir, args.timeout, args.check_numerics))
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=2)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
