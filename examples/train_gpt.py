"""Train a tiny character-level GPT on the text in ``examples/data/`` for a few steps.

Plain PyTorch: ``python examples/train_gpt.py`` compiles with torch's default backend (Inductor),
``thundervis run examples/train_gpt.py`` routes the same ``torch.compile(model)`` call through
thundervis, and ``--backend thundervis`` asks for it explicitly. ``--eager`` runs without compiling.
Each step prints one parseable line, ``step N loss X.XXXXXX`` (steps counted from 0).

Attention is written out as matmul + mask + softmax (no ``scaled_dot_product_attention``), so it
decomposes into the compiler's prims. Dropout defaults to 0.0: compiled and eager losses are then
equal step for step. With ``--dropout > 0`` they stay equal only when the compiled code draws the
same random numbers in the same order as eager (the torch executor runs ``aten.native_dropout``, so
it does; a fusion executor that generates its own random numbers does not).

Tests and benchmarks import :func:`build` and :func:`train` from this file.
"""
from __future__ import annotations

import argparse
import math
import os
from typing import Callable, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lighthouse.txt")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position sees only itself and earlier positions."""

    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    """Pre-norm transformer block: attention then a GELU MLP, each with a residual connection."""

    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layer`` blocks, final LayerNorm and a linear head."""

    def __init__(self, vocab: int, block_size: int = 32, n_embd: int = 32, n_head: int = 4, n_layer: int = 2,
                 dropout: float = 0.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, block_size, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab)

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None):
        """Return (logits, loss); loss is the cross-entropy against ``targets`` (None without them)."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def load_text(path: str = DATA) -> tuple[torch.Tensor, list[str]]:
    """Return (the text as a tensor of character ids, the sorted vocabulary)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), vocab


def build(seed: int = 0, dropout: float = 0.0, batches: int = 8, batch_size: int = 8, block_size: int = 32,
          n_embd: int = 32, n_head: int = 4, n_layer: int = 2, path: str = DATA) -> tuple[nn.Module, list]:
    """Return (model, batches): a freshly initialised GPT and (inputs, targets) batches of the text.

    Everything is drawn from ``seed``: two calls with the same arguments give identical models and data.
    """
    data, vocab = load_text(path)
    torch.manual_seed(seed)
    model = GPT(len(vocab), block_size, n_embd, n_head, n_layer, dropout)
    gen = torch.Generator().manual_seed(seed + 1)
    out = []
    for _ in range(batches):
        starts = torch.randint(0, len(data) - block_size - 1, (batch_size,), generator=gen)
        x = torch.stack([data[s:s + block_size] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + 1 + block_size] for s in starts.tolist()])
        out.append((x, y))
    return model, out


def train(model: nn.Module, batches: Sequence, steps: int, compile_fn: Optional[Callable] = None,
          lr: float = 3e-3, seed: int = 0, log: Optional[Callable[[str], None]] = None,
          loss_of: Optional[Callable] = None) -> list[float]:
    """Train ``model`` for ``steps`` AdamW steps over ``batches`` (cycled); return the loss per step.

    ``compile_fn(model)`` returns the callable to run (None: eager). The global RNG is seeded with
    ``seed`` first, so runs with dropout draw the same masks. ``log`` receives ``step N loss X`` lines.
    ``loss_of(run, x, y)`` returns a step's loss (default: the GPT's own, ``run(x, y)`` returns
    ``(logits, loss)``); ``train_mlp.py`` trains its MLP with this loop.
    """
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    run = compile_fn(model) if compile_fn is not None else model
    model.train()
    torch.manual_seed(seed)
    losses = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        loss = run(x, y)[1] if loss_of is None else loss_of(run, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log is not None:
            log(f"step {step} loss {losses[-1]:.6f}")
    return losses


def compile_fn_for(eager: bool, backend: Optional[str]) -> Optional[Callable]:
    """Return how to compile the model for the command-line options (None: run eagerly)."""
    if eager:
        return None
    if backend:
        return lambda model: torch.compile(model, backend=backend)
    # No backend argument on purpose: `thundervis run` routes this call through thundervis.
    return lambda model: torch.compile(model)


def example_parser(description: str, steps: int) -> argparse.ArgumentParser:
    """Return a parser with the options every example takes: ``--steps`` (default ``steps``),
    ``--seed``, ``--backend`` and ``--eager`` (see :func:`compile_fn_for`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=steps, help=f"training steps (default {steps})")
    parser.add_argument("--seed", type=int, default=0, help="seed for the model, the data and dropout (default 0)")
    parser.add_argument("--backend", default=None, help="torch.compile backend (default: torch's default)")
    parser.add_argument("--eager", action="store_true", help="run without torch.compile")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line, train, print one line per step; return the exit code."""
    parser = example_parser(__doc__.splitlines()[0], steps=10)
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout probability (default 0.0, which keeps compiled == eager exactly)")
    parser.add_argument("--data", default=DATA, help="text file to train on (default: the shipped one)")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.data):
        parser.error(f"no text file at {args.data}")
    if not 0.0 <= args.dropout < 1.0:
        parser.error("--dropout must be in [0, 1)")
    model, batches = build(args.seed, dropout=args.dropout, path=args.data)
    train(model, batches, args.steps, compile_fn_for(args.eager, args.backend), seed=args.seed, log=print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
