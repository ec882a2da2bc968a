"""Llama as memwall's zoo builds it (src/models/llama.cc: llama2-*,
llama3-8b at any shape), as PyTorch modules that parallelize_module can
split and torch.distributed.pipelining can cut: RMSNorm, rotary tables made
once a forward and shared by the stage's layers, grouped-query attention
(repeat_kv), SwiGLU (w1, w3, w2), no biases, no dropout, an untied output
head, cross-entropy inside the last stage. Tensor parallelism as Note
[Tensor parallelism in the zoo]: wq/wk/wv and w1/w3 column-parallel sharing
one input and one summed gradient, wo and w2 row-parallel, the embedding and
the head vocabulary-parallel. Kernels: Note [Kernels as memwall counts them]
in memwall.parallel_kernels.
"""
from __future__ import annotations

import collections
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from memwall.parallel_kernels import NO_TP, ParallelEmbedding, TPGroup, _grad_of, column, \
    row, scaled_masked_softmax, vocab_parallel_loss

EPS = 1e-5  # rms_norm_eps of Llama-2 and Llama-3 (HF config.json)


def rope_theta(model: str) -> float:
    """HF config.json's rope_theta (the memory does not depend on it)."""
    return 500000.0 if model.startswith("llama3") else 10000.0


class _RmsNormFn(torch.autograd.Function):
    """y = x * rstd * w, as memwall's rms_norm: saves x and the fp32 per-row
    rstd; backward makes dx and accumulates dw into the weight's grad, with
    no [rows, h] temporary beyond dx itself."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        h = x.shape[-1]
        stats = torch.promote_types(x.dtype, torch.float32)  # fp32 (fp64 in checks)
        norm = torch.linalg.vector_norm(x, dim=-1, dtype=stats)
        rstd = norm.square_().div_(h).add_(eps).rsqrt_()  # [rows] fp32, reusing norm
        y = torch.mul(x, rstd.unsqueeze(-1).to(x.dtype))
        y.mul_(weight)
        ctx.save_for_backward(x, rstd)
        ctx.weight = weight
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        x, rstd = ctx.saved_tensors
        w = ctx.weight
        h = x.shape[-1]
        r = rstd.to(x.dtype)
        dx = torch.mul(g, x)  # g * x first: dw and the row dot products read it
        rows = dx.view(-1, h)
        _grad_of(w).addmv_(rows.t(), r.reshape(-1))  # dw = sum_rows g x rstd
        dot = torch.mv(rows, w)  # sum_j g w x, per row
        coef = dot.mul_(r.reshape(-1).pow(3)).div_(h).view(r.shape).unsqueeze(-1)
        # dx = rstd g w - x rstd^3 sum(g w x) / h
        dx.copy_(g).mul_(w).mul_(r.unsqueeze(-1)).addcmul_(x, coef, value=-1)
        return dx, None, None


class RmsNorm(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RmsNormFn.apply(x, self.weight, EPS)


def rope_tables(s: int, d: int, theta: float, dtype: torch.dtype,
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's cos and sin [s, d] (cat(freqs, freqs)), made in each forward of a
    stage as memwall's graph inputs rope.cos / rope.sin: a micro-batch's
    pair lives until the stage's last rotary backward."""
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d)
    freqs = torch.outer(torch.arange(s, dtype=torch.float32, device=device), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class _RotaryFn(torch.autograd.Function):
    """x * cos + rotate_half(x) * sin of a projection viewed [b, s, n, d],
    written as a new [b, n, s, d] (memwall's rotary); saves the tables only.
    Backward: the transposed rotation, written back as [b, s, n, d]."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, n, d = x.shape
        half = d // 2
        xt = x.transpose(1, 2)
        out = torch.empty(b, n, s, d, dtype=x.dtype, device=x.device)
        torch.mul(xt, cos, out=out)
        out[..., :half].addcmul_(xt[..., half:], sin[:, :half], value=-1)
        out[..., half:].addcmul_(xt[..., :half], sin[:, half:])
        ctx.save_for_backward(cos, sin)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        cos, sin = ctx.saved_tensors
        b, n, s, d = g.shape
        half = d // 2
        dx = torch.empty(b, s, n, d, dtype=g.dtype, device=g.device)
        dxt = dx.transpose(1, 2)
        torch.mul(g, cos, out=dxt)
        dxt[..., :half].addcmul_(g[..., half:], sin[:, half:])
        dxt[..., half:].addcmul_(g[..., :half], sin[:, :half], value=-1)
        return dx, None, None


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    # HF's repeat_kv: expand + reshape, one [b, n * groups, s, d] copy.
    b, n, s, d = x.shape
    return x[:, :, None].expand(b, n, groups, s, d).reshape(b, n * groups, s, d)


class _GqaAttentionFn(torch.autograd.Function):
    """Causal grouped-query attention as memwall's plain_attention: k and v
    repeated to the query heads (the copies saved, as HF's repeat_kv feeds
    the matmuls), scores transient, probabilities saved, the context written
    as [b, s, heads * d]. Backward in autograd's order: dP, dV, dS, dQ, dK,
    then the group sums of dV and dK."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, heads, s, d = q.shape  # q, k rotated [b, n, s, d]; v the projection [b, s, n, d]
        groups = heads // k.shape[1]
        kk = _repeat_kv(k, groups) if groups > 1 else k
        vv = _repeat_kv(v.transpose(1, 2), groups) if groups > 1 else v.transpose(1, 2)
        probs = scaled_masked_softmax(torch.matmul(q, kk.transpose(-1, -2)), d)
        out = torch.matmul(probs, vv).transpose(1, 2).reshape(b, s, heads * d)
        ctx.save_for_backward(q, kk, vv, probs)
        ctx.groups = groups
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, kk, vv, probs = ctx.saved_tensors
        b, heads, s, d = q.shape
        groups = ctx.groups
        kv = heads // groups
        g4 = g.view(b, s, heads, d).transpose(1, 2)
        dp = torch.matmul(g4, vv.transpose(-1, -2))
        dvv = torch.matmul(probs.transpose(-1, -2), g4)
        ds = torch.ops.aten._softmax_backward_data(dp, probs, -1, probs.dtype)
        del dp
        ds.mul_(d ** -0.5)
        dq = torch.matmul(ds, kk)
        dkk = torch.matmul(ds.transpose(-1, -2), q)
        del ds
        # dV back in the projection's [b, s, kv, d] layout, summed over groups.
        dv = torch.empty(b, s, kv, d, dtype=g.dtype, device=g.device)
        dvt = dv.transpose(1, 2)
        parts = dvv.view(b, kv, groups, s, d)
        dvt.copy_(parts[:, :, 0])
        for j in range(1, groups):
            dvt.add_(parts[:, :, j])
        del dvv, parts
        dk = dkk.view(b, kv, groups, s, d).sum(2) if groups > 1 else dkk
        return dq, dk, dv


class Attention(nn.Module):
    """wq, wk, wv column-parallel over one input (one gather under SP), the
    rotary tables applied to q and k, GQA core, wo row-parallel. The linears
    hold the weights ShardParams splits; their forward is not called."""

    def __init__(self, h: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.head_dim = h // heads
        self.wq = nn.Linear(h, h, bias=False)
        self.wk = nn.Linear(h, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(h, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(h, h, bias=False)
        for lin, split in ((self.wq, "col"), (self.wk, "col"), (self.wv, "col"),
                           (self.wo, "row")):
            lin.split = split  # type: ignore[assignment]
        self.tp: TPGroup = NO_TP

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q, k, v = column(x, self.tp, [self.wq, self.wk, self.wv])
        b, s, d = q.shape[0], q.shape[1], self.head_dim
        qr = _RotaryFn.apply(q.view(b, s, -1, d), cos, sin)
        kr = _RotaryFn.apply(k.view(b, s, -1, d), cos, sin)
        ctx = _GqaAttentionFn.apply(qr, kr, v.view(b, s, -1, d))
        return row(ctx, self.tp, self.wo)


class SwiGlu(nn.Module):
    """w2(silu(w1 x) * w3 x): w1, w3 column-parallel over one input, w2
    row-parallel; silu and the product are autograd's (saving w1's output,
    silu's output and w3's output, as memwall's silu and mul)."""

    def __init__(self, h: int, ffn: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(h, ffn, bias=False)
        self.w3 = nn.Linear(h, ffn, bias=False)
        self.w2 = nn.Linear(ffn, h, bias=False)
        for lin, split in ((self.w1, "col"), (self.w3, "col"), (self.w2, "row")):
            lin.split = split  # type: ignore[assignment]
        self.tp: TPGroup = NO_TP

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = column(x, self.tp, [self.w1, self.w3])
        return row(F.silu(gate) * up, self.tp, self.w2)


class Block(nn.Module):
    def __init__(self, h: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.attention_norm = RmsNorm(h)
        self.attn = Attention(h, heads, kv_heads)
        self.ffn_norm = RmsNorm(h)
        self.mlp = SwiGlu(h, ffn)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attention_norm(x), cos, sin)
        return x + self.mlp(self.ffn_norm(x))


class LlamaStage(nn.Module):
    """Blocks [first, end) of a Llama, with the token embedding when
    ``embedding`` and the final norm, the output head and the loss when
    ``head``."""

    def __init__(self, model: str, shape: dict[str, int], padded_vocab: int, first: int,
                 end: int, embedding: bool, head: bool) -> None:
        super().__init__()
        h, heads = shape["hidden"], shape["heads"]
        self.head_dim, self.theta = h // heads, rope_theta(model)
        self.has_embedding, self.has_head = embedding, head
        self.layers = nn.ModuleDict({
            str(i): Block(h, heads, shape["kv_heads"], shape["ffn"]) for i in range(first, end)})
        if embedding:
            self.tok_embeddings = ParallelEmbedding(padded_vocab, h, vocab=True)
        if head:
            self.norm = RmsNorm(h)
            self.output = nn.Linear(h, padded_vocab, bias=False)
            self.output.split = "col"  # type: ignore[assignment]
        self.labels: collections.deque[torch.Tensor] = collections.deque()
        self.tp: TPGroup = NO_TP

    def tied_weight(self) -> nn.Parameter | None:
        return None  # Llama's head is its own

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.has_embedding:
            s = x.shape[1]
            x = self.tok_embeddings(x)
        else:
            s = x.shape[1] * (self.tp.size if self.tp.sequence else 1)
        cos, sin = rope_tables(s, self.head_dim, self.theta, x.dtype, x.device)
        for block in self.layers.values():
            x = block(x, cos, sin)
        if not self.has_head:
            return x
        (logits,) = column(self.norm(x), self.tp, [self.output])
        return vocab_parallel_loss(logits, self.labels.popleft(), self.tp)
