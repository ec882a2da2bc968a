"""GPT-2 as memwall's zoo builds it (src/models/gpt2.cc), as PyTorch modules
that parallelize_module can split and torch.distributed.pipelining can cut;
the kernels and the collectives are memwall.parallel_kernels' (Note
[Kernels as memwall counts them] there).
"""
from __future__ import annotations

import collections
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from memwall.parallel_kernels import NO_TP, Dropout, ParallelEmbedding, ParallelLinear, \
    scaled_masked_softmax, vocab_parallel_loss

DROPOUT = 0.1  # GPT-2's embd_pdrop, attn_pdrop and resid_pdrop


class _AttentionFn(torch.autograd.Function):
    """Causal softmax attention over a fused QKV laid out per head
    ([b, s, heads * 3 * d]), as memwall's plain_attention: scores transient
    (scale and mask fused before the softmax), probabilities, dropped
    probabilities and mask saved, the context written as [b, s, heads * d]."""

    @staticmethod
    def forward(ctx: Any, qkv: torch.Tensor, head_dim: int, p: float,
                training: bool) -> torch.Tensor:
        b, s, width = qkv.shape
        heads = width // (3 * head_dim)
        parts = qkv.view(b, s, heads, 3, head_dim)
        q = parts[:, :, :, 0].transpose(1, 2)
        k = parts[:, :, :, 1].transpose(1, 2)
        v = parts[:, :, :, 2].transpose(1, 2)
        probs = scaled_masked_softmax(torch.matmul(q, k.transpose(-1, -2)), head_dim)
        if training and p > 0:
            dropped, mask = torch.ops.aten.native_dropout(probs, p, True)
        else:
            dropped, mask = probs, probs.new_empty(0, dtype=torch.bool)
        out = torch.matmul(dropped, v).transpose(1, 2).reshape(b, s, heads * head_dim)
        ctx.save_for_backward(qkv, probs, dropped, mask)
        ctx.meta = (heads, head_dim, head_dim ** -0.5, p, training and p > 0)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        qkv, probs, dropped, mask = ctx.saved_tensors
        heads, d, scale, p, dropout = ctx.meta
        b, s, _ = qkv.shape
        parts = qkv.view(b, s, heads, 3, d)
        q = parts[:, :, :, 0].transpose(1, 2)
        k = parts[:, :, :, 1].transpose(1, 2)
        v = parts[:, :, :, 2].transpose(1, 2)
        g4 = g.view(b, s, heads, d).transpose(1, 2)
        dqkv = torch.empty_like(qkv)
        dparts = dqkv.view(b, s, heads, 3, d)
        dp = torch.matmul(g4, v.transpose(-1, -2))
        dparts[:, :, :, 2].copy_(torch.matmul(dropped.transpose(-1, -2), g4).transpose(1, 2))
        if dropout:
            dp = torch.ops.aten.native_dropout_backward(dp, mask, 1.0 / (1.0 - p))
        ds = torch.ops.aten._softmax_backward_data(dp, probs, -1, probs.dtype)
        del dp
        ds.mul_(scale)
        dparts[:, :, :, 0].copy_(torch.matmul(ds, k).transpose(1, 2))
        dparts[:, :, :, 1].copy_(torch.matmul(ds.transpose(-1, -2), q).transpose(1, 2))
        return dqkv, None, None, None


class Mlp(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.c_fc = ParallelLinear(h, 4 * h, "col")
        self.c_proj = ParallelLinear(4 * h, h, "row")
        self.dropout = Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.c_fc(x), approximate="tanh")
        return self.dropout(self.c_proj(y))


class Attention(nn.Module):
    def __init__(self, h: int, heads: int) -> None:
        super().__init__()
        self.head_dim = h // heads
        # Rows per head (q, k, v of head 0, then head 1, ...): a Shard(0)
        # split gives each rank whole heads.
        self.c_attn = ParallelLinear(h, 3 * h, "col")
        self.c_proj = ParallelLinear(h, h, "row")
        self.resid_dropout = Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.c_attn(x)
        a = _AttentionFn.apply(qkv, self.head_dim, DROPOUT, self.training)
        return self.resid_dropout(self.c_proj(a))


class Block(nn.Module):
    """A pre-LN GPT-2 block (HF GPT2Block); under sequence parallelism its
    norms, dropouts and residuals run on [b, s/t, h]."""

    def __init__(self, h: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(h)
        self.attn = Attention(h, heads)
        self.ln_2 = nn.LayerNorm(h)
        self.mlp = Mlp(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Stage(nn.Module):
    """Blocks [first, end) of a GPT-2, with the embeddings when ``embedding``
    and the final norm, the tied head and the loss when ``head``."""

    def __init__(self, shape: dict[str, int], padded_vocab: int, first: int, end: int,
                 embedding: bool, head: bool) -> None:
        super().__init__()
        h = shape["hidden"]
        self.has_embedding, self.has_head = embedding, head
        self.h = nn.ModuleDict({str(i): Block(h, shape["heads"]) for i in range(first, end)})
        if embedding:
            self.wte = ParallelEmbedding(padded_vocab, h, vocab=True)
            self.wpe = ParallelEmbedding(shape["positions"], h, vocab=False)
            self.drop = Dropout(DROPOUT)
        if head:
            self.ln_f = nn.LayerNorm(h)
            self.lm_head = ParallelLinear(h, padded_vocab, "col", bias=False)
        self.labels: collections.deque[torch.Tensor] = collections.deque()
        self.tp = NO_TP

    def tied_weight(self) -> nn.Parameter | None:
        """The table the first and last stage share (Megatron's embedding group)."""
        return self.wte.weight if self.has_embedding else \
            self.lm_head.weight if self.has_head else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.has_embedding:
            s = x.shape[1] // self.tp.size if self.tp.sequence else x.shape[1]
            # Under SP this rank's positions follow the reduce-scatter's split.
            first = self.tp.rank * s if self.tp.sequence else 0
            positions = torch.arange(first, first + s, device=x.device)
            x = self.drop(self.wte(x) + self.wpe(positions))
        for block in self.h.values():
            x = block(x)
        if not self.has_head:
            return x
        return vocab_parallel_loss(self.lm_head(self.ln_f(x)), self.labels.popleft(), self.tp)


def tie_embeddings(stage: Gpt2Stage) -> None:
    """GPT-2's head is the token embedding (same stage: one Parameter)."""
    if stage.has_embedding and stage.has_head:
        stage.lm_head.weight = stage.wte.weight
