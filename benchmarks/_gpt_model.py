"""The model the benchmarks measure: ``examples/train_gpt.py``'s GPT when it is importable, else a
small GPT-like model defined here (same shape of work: embeddings, attention, MLP, cross-entropy)."""
from __future__ import annotations

import importlib.util
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_gpt.py")


class _Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.n_head = n_head
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.fc1, self.fc2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class _GPT(nn.Module):
    def __init__(self, vocab=65, block_size=32, n_embd=32, n_head=4, n_layer=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(_Block(n_embd, n_head, block_size) for _ in range(n_layer))
        self.ln, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build(seed: int = 0):
    """Return (model, [(inputs, targets), ...]) and the name of where the model came from."""
    if os.path.exists(EXAMPLE):
        try:
            spec = importlib.util.spec_from_file_location("train_gpt_example", EXAMPLE)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            model, batches = mod.build(seed)
            return model, batches, "examples/train_gpt.py"
        except Exception as e:  # the example changed shape: fall back to the local model
            print(f"(examples/train_gpt.py not usable: {type(e).__name__}: {e}; using the local model)")
    torch.manual_seed(seed)
    model = _GPT()
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [(torch.randint(0, 65, (8, 32), generator=gen), torch.randint(0, 65, (8, 32), generator=gen))
               for _ in range(4)]
    return model, batches, "benchmarks/_gpt_model.py"


def train_step(run, model, opt, batch):
    """One training step: forward, backward, optimizer step; returns the loss tensor."""
    x, y = batch
    _, loss = run(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss
