"""memwall's built-in models (--builtin NAME), beside torchvision's
classifiers: the models of `memwall bench fidelity` and `memwall run`'s
tests."""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from memwall.sources import Built


def gpt(vocab: int, positions: int, layers: int, hidden: int, heads: int, batch: int, seq: int,
        dropout: float) -> Built:
    """A GPT-2-shaped model (model, batch, loss_fn, optimizer): learned token
    and position embeddings, pre-LN blocks with a fused QKV projection (with
    bias), plain (not flash) causal attention with dropout on the
    probabilities, a GELU MLP of width 4h, dropout on the embeddings and both
    residual branches, a final LayerNorm and an LM head tied to the token
    embedding; cross-entropy over all b*s positions; Adam (foreach=False) in
    fp32. tests/python/gpt2_small.py builds GPT-2 small with it."""
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln_2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.fc_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            # Scale and mask before the softmax: the scores are transient,
            # the softmax output (and its dropout) is what backward keeps.
            b, s, h = x.shape
            d = h // heads
            q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
            q, k, v = (t.view(b, s, heads, d).transpose(1, 2) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + mask
            probs = F.dropout(F.softmax(scores, dim=-1), dropout, self.training)
            a = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
            x = x + F.dropout(self.proj(a), dropout, self.training)
            m = self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
            return x + F.dropout(m, dropout, self.training)

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(positions, hidden)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)

        def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            x = F.dropout(self.wte(ids) + self.wpe(positions), dropout, self.training)
            # One additive causal mask shared by every layer (no gradient).
            mask = torch.full((ids.shape[1], ids.shape[1]), float("-inf")).triu(1)
            for block in self.h:
                x = block(x, mask)
            return F.linear(self.ln_f(x), self.wte.weight)

    model = Gpt()
    ids = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.view(-1, vocab), target.view(-1))

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    return Built(model, ((ids, torch.arange(seq)), labels), loss_fn, optimizer)


def gpt_mini(dropout: float) -> Built:
    """gpt() small enough for a CPU step in seconds: 2 layers, h=128, 4
    heads, s=128, vocab 2048, batch 4."""
    return gpt(vocab=2048, positions=128, layers=2, hidden=128, heads=4, batch=4, seq=128,
               dropout=dropout)


def linear_toy() -> Built:
    """Issue 20's toy: two bias-free Linear(2000, 2000), batch 16, MSE, Adam
    (foreach=False), where torch's single-tensor Adam keeps the previous
    parameter's denom alive while it allocates the next one's."""
    model = nn.Sequential(nn.Linear(2000, 2000, bias=False), nn.Linear(2000, 2000, bias=False))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return Built(model, (torch.randn(16, 2000), torch.randn(16, 2000)),
                 torch.nn.functional.mse_loss, optimizer)


BUILTINS: dict[str, Callable[[], Built]] = {
    "gpt-mini": lambda: gpt_mini(0.1),
    "gpt-mini-nodropout": lambda: gpt_mini(0.0),
    "linear-toy": linear_toy,
}
