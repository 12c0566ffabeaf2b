"""The saved activations of a Llama-3 decoder layer: the analytic count (docs/memory.md) against the
memory ledger (``--remat off`` and ``auto``) and against eager autograd measured from outside.

Two configs, two layers each (per-layer figures do not depend on depth; the first layer also holds
the rotary cos/sin, which every layer shares, so the second layer is the one compared):

- ``8b``: Llama-3-8B's layer shapes (h 4096, FFN 14336, 32 heads, 8 KV heads, seq 4096, batch 1,
  bf16), on fake tensors: the ledger from abstract runs, the eager count from
  ``saved_tensors_hooks`` on the same fake model (hooks see fake tensors' storages as they would
  real ones; nothing is allocated);
- ``small``: h 256, FFN 704, 8 heads, 2 KV heads, seq 64, batch 2, bf16, on real tensors, to confirm
  the formula on a model that really runs.

Prints bytes / (s·b·h) per term of the formula, per layer for each measurement, and the ledger's
rows of the second layer. Usage: ``python benchmarks/memory_block_llama.py [--configs 8b,small]``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_block import print_saved, step_ledger  # noqa: E402

CONFIGS = {  # name: (hidden, ffn, heads, kv heads, seq, batch, vocab, abstract)
    "8b": (4096, 14336, 32, 8, 4096, 1, 128256, True),
    "small": (256, 704, 8, 2, 64, 2, 512, False),
}
LAYER = "model.layers.1"  # the compared layer (layer 0 also holds the shared rotary cos/sin)


def formula(h: int, ffn: int, a: int, a_kv: int, s: int, b: int) -> dict:
    """Return {term: bytes} of one layer as eager autograd saves it (``off``) and as the min-cut keeps
    it (``auto``); docs/memory.md derives each term. d = h / a is the head dimension."""
    d = h // a
    sbh, sb = s * b * h, s * b
    off = {"RMSNorm x2: fp32 input copy (4sbh) + normalized bf16 (2sbh)": 2 * 6 * sbh,
           "RMSNorm x2: 1/rms, fp32 [s,b,1]": 2 * 4 * sb,
           "q/k/v input (norm output)": 2 * sbh, "Q after RoPE": 2 * sbh,
           "K after RoPE, V (a_kv heads)": 2 * 2 * sb * a_kv * d,
           "attention output O (= o_proj input)": 2 * sbh, "logsumexp, fp32 [b,a,s]": 4 * a * sb,
           "MLP input (norm output)": 2 * sbh,
           "gate, up, silu(gate), silu(gate)*up": 4 * 2 * sb * ffn}
    auto = {"layer input x (bf16)": 2 * sbh, "RMSNorm x2: 1/rms, fp32 [s,b,1]": 2 * 4 * sb,
            "Q after RoPE": 2 * sbh, "K after RoPE, V (a_kv heads)": 2 * 2 * sb * a_kv * d,
            "attention output O (= o_proj input)": 2 * sbh, "logsumexp, fp32 [b,a,s]": 4 * a * sb,
            "attention residual sum (post-norm input)": 2 * sbh, "gate, up": 2 * 2 * sb * ffn}
    return {"off": off, "auto": auto}


def build(name: str, layers: int = 2):
    """Return (model, kwargs, dims) of config ``name``: a bf16 Llama of ``layers`` layers, seeded."""
    from model_zoo import import_torchvision
    import_torchvision()
    import transformers
    h, ffn, a, a_kv, s, b, vocab, _ = CONFIGS[name]
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers,
                                   num_attention_heads=a, num_key_value_heads=a_kv, max_position_embeddings=s,
                                   rope_theta=500000.0, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).train()
    ids = torch.randint(0, vocab, (b, s))
    return model, {"input_ids": ids, "labels": ids}, (h, ffn, a, a_kv, s, b)


def hooks_by_layer(model, kwargs) -> dict:
    """Return {layer index: bytes} that eager autograd saves while each decoder layer runs, counted
    with ``saved_tensors_hooks``: distinct storages, each to the layer that saved it first,
    parameters and buffers excluded (the count of ``_memory_models.saved_bytes``, per layer)."""
    from torch.multiprocessing.reductions import StorageWeakRef
    own = {StorageWeakRef(p.untyped_storage()) for p in list(model.parameters()) + list(model.buffers())}
    where, first = [None], {}
    handles = []
    for i, layer in enumerate(model.model.layers):
        handles.append(layer.register_forward_pre_hook(lambda m, args, i=i: where.__setitem__(0, i)))
        handles.append(layer.register_forward_hook(lambda m, args, out: where.__setitem__(0, None)))

    def pack(t):
        key = StorageWeakRef(t.untyped_storage())
        if key not in own and key not in first:
            first[key] = (where[0], t.untyped_storage().nbytes())
        return t
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(**kwargs).loss
        loss.backward()
    finally:
        for hd in handles:
            hd.remove()
    out: dict = {}
    for layer, nbytes in first.values():
        out[layer] = out.get(layer, 0) + nbytes
    return out


def measure(name: str, layers: int = 2) -> dict:
    """Return {"dims", "hooks": {layer: bytes}, "off"/"auto": memory report} for config ``name``."""
    abstract = CONFIGS[name][-1]
    session = contextlib.nullcontext()
    if abstract:
        from thundervis.compiler.abstract import Placeholders, abstract_session
        session = abstract_session(Placeholders(), gpu_visible=False)
    with session:
        model, kwargs, dims = build(name, layers)
        out = {"dims": dims, "hooks": hooks_by_layer(model, kwargs)}
        for remat in ("off", "auto"):
            model.zero_grad(set_to_none=True)
            out[remat] = step_ledger(model, kwargs, remat, f"llama-{name}", abstract=abstract)
    return out


def layer_bytes(report, index: int) -> int:
    """Return the ledger's counted saved bytes of decoder layer ``index``: the rows of the modules under
    ``model.layers.<index>`` (the RoPE'd Q and K included: compiler.source puts the ops of
    transformers' module-global ``apply_rotary_pos_emb`` under the attention layer that called it)."""
    prefix = f"model.layers.{index}"
    return sum(g.bytes for g in report.by_module if g.label == prefix or g.label.startswith(prefix + "."))


def main() -> int:
    """Print formula, ledger and hooks per config; return 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="8b,small", help="comma-separated: " + ", ".join(CONFIGS))
    p.add_argument("--layers", type=int, default=2, help="decoder layers (at least 2; default 2)")
    args = p.parse_args()
    if args.layers < 2:
        print("memory_block_llama: --layers must be at least 2 (layer 1 is the one compared)", file=sys.stderr)
        return 2
    names = [n for n in args.configs.split(",") if n]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        print(f"memory_block_llama: unknown config {bad[0]!r}; choose from {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    for name in names:
        r = measure(name, args.layers)
        h, ffn, a, a_kv, s, b = r["dims"]
        sbh = s * b * h
        f = formula(h, ffn, a, a_kv, s, b)
        print(f"\n{name}: h={h} I={ffn} a={a} a_kv={a_kv} d={h // a} s={s} b={b}, bf16, SDPA; "
              f"s·b·h = {sbh} (figures are bytes / s·b·h, per layer)")
        print(f"  formula off  = 20 + 4·a_kv/a + 8·I/h + 4a/h + 8/h = {sum(f['off'].values()) / sbh:8.3f}")
        for term, v in f["off"].items():
            print(f"      {v / sbh:8.3f}  {term}")
        print(f"  formula auto =  8 + 4·a_kv/a + 4·I/h + 4a/h + 8/h = {sum(f['auto'].values()) / sbh:8.3f}")
        for term, v in f["auto"].items():
            print(f"      {v / sbh:8.3f}  {term}")
        hooks = [r["hooks"].get(i, 0) / sbh for i in range(args.layers)]
        print(f"  eager (hooks): layer 0 {hooks[0]:8.3f}  layers 1–{args.layers - 1} {min(hooks[1:]):8.3f} to "
              f"{max(hooks[1:]):8.3f}   outside the layers {r['hooks'].get(None, 0) / sbh:8.3f}")
        for remat in ("off", "auto"):
            rep = r[remat]
            each = [layer_bytes(rep, i) / sbh for i in range(args.layers)]
            rest = f"  layers 1–{args.layers - 1} {min(each[1:]):8.3f} to {max(each[1:]):8.3f}"
            print(f"  ledger {remat:<4}: layer 0 {each[0]:8.3f}{rest}   whole step {rep.saved_bytes / sbh:8.3f}")
            print_saved(rep, LAYER, sbh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
