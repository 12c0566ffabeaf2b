"""The models and the outside counter of ``benchmarks/saved_memory.py`` (also used by the ledger's
test): GPT-2-, Llama- and BERT-like models built from ``transformers`` configs (random init, no
download, no dropout so compiled and eager agree), and :func:`saved_bytes`, which counts what one
training step saves for backward the way autograd sees it."""
from __future__ import annotations

import os
import sys

import torch

# model_zoo sits beside this file. Imported now, with this file's folder on sys.path, so that build()
# works however this module was reached (a test adds the folder to sys.path only while importing it).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from model_zoo import import_torchvision  # noqa: E402

HIDDEN, LAYERS, BATCH, SEQ, VOCAB = 128, 2, 4, 128, 1024


def build(name: str, hidden: int = HIDDEN, layers: int = LAYERS, batch: int = BATCH, seq: int = SEQ):
    """Return (model, batch of keyword arguments) of model ``name`` (gpt2, llama, bert), seeded."""
    import_torchvision()  # transformers imports torchvision when installed: make that import work
    import transformers
    torch.manual_seed(0)
    heads = max(1, hidden // 32)
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=hidden, n_layer=layers, n_head=heads,
                                      n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=4 * hidden,
                                       num_hidden_layers=layers, num_attention_heads=heads,
                                       num_key_value_heads=heads, max_position_embeddings=seq)
        model = transformers.LlamaForCausalLM(cfg)
    elif name == "bert":
        cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                                      num_attention_heads=heads, intermediate_size=4 * hidden,
                                      max_position_embeddings=seq, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0, num_labels=2)
        model = transformers.BertForSequenceClassification(cfg)
    else:
        raise ValueError(f"unknown model {name!r}: gpt2, llama or bert")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    labels = torch.randint(0, 2, (batch,), generator=g) if name == "bert" else ids
    model.train()
    return model, {"input_ids": ids, "labels": labels}


def step(run, model, batch) -> float:
    """Run one training step (forward, loss, backward) of ``model`` through ``run``; return the loss."""
    loss = run(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return float(loss.detach())


def saved_bytes(run, model, batch) -> tuple[int, int]:
    """Return (bytes, tensors) saved for backward by one training step: distinct storages (keyed by
    the untyped storage's data pointer and size), the model's parameters and buffers excluded."""
    own = {p.untyped_storage().data_ptr() for p in list(model.parameters()) + list(model.buffers())}
    storages: dict = {}
    count = [0]

    def pack(t):
        if isinstance(t, torch.Tensor):
            s = t.untyped_storage()
            if s.data_ptr() not in own:
                storages[(s.data_ptr(), s.nbytes())] = s.nbytes()
                count[0] += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(storages.values()), len(storages)
