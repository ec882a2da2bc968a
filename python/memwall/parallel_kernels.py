"""The kernels memwall.parallel's models share: tensor- and sequence-parallel
linears, the vocabulary-parallel embedding and loss, dropout, each an
autograd.Function over local tensors that keeps what memwall's graph keeps.

Note [Kernels as memwall counts them]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The models' modules are nn.Linear, nn.Embedding and nn.LayerNorm (or
RMSNorm), so parallelize_module can shard their weights (ShardParams: the
parameters alone, no input or output hooks), but the compute of every op
holding a weight, of the attention core and of the collectives is a custom
autograd.Function over local tensors, each a place where eager PyTorch's own
kernels would keep other bytes than memwall's graph:
 - weight gradients are accumulated straight into the persistent
   ``param.grad`` (Megatron-LM's gradient_accumulation_fusion, which memwall
   models: a weight-gradient op updates the gradient in place); autograd's
   AccumulateGrad would first make a weight-sized gradient, then add it;
 - the attention core saves what memwall's plain_attention does (the
   projections' outputs or their rotated copies, the probabilities, the
   dropout mask); ``torch.matmul`` on the strided per-head views would save
   contiguous copies instead;
 - the tensor-parallel sums are in-place all-reduces (Megatron's f and g),
   as memwall's tp_all_reduce ops; DTensor's redistribute is out of place;
 - with sequence parallelism (Note [Tensor parallelism in the zoo] in
   src/models/tensor_parallel.cc) a column-parallel group gathers its
   [b, s/t, h] input once, does not save the gathered [b, s, h] but
   gathers it again in backward, and reduce-scatters its input's gradient;
   a row-parallel output is reduce-scattered and its gradient gathered, by
   a node of its own (_ScatterToSeqFn), so the [b, s/t, h] gradient dies
   at the gather, as memwall frees it.
   DTensor's SequenceParallel + ColwiseParallel would save the gathered
   input (autograd keeps the matmul's operand): 2x the norm's output more
   per column-parallel group.
The loss is computed inside the last stage (labels from a queue), so
pipelining caches the scalar loss, not the logits, as Megatron-LM does.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, \
    distribute_tensor
from torch.distributed.tensor.parallel import ParallelStyle


def local(t: torch.Tensor) -> torch.Tensor:
    """The rank's shard of a DTensor, or the tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def _grad_of(param: torch.Tensor) -> torch.Tensor:
    # The persistent gradient buffer allocated by allocate_grads().
    if param.grad is None:
        raise RuntimeError("parallel model: gradients must be allocated before backward")
    return local(param.grad)


def allocate_grads(module: nn.Module) -> None:
    """Zeroed gradients for the whole run (Megatron-LM's contiguous buffer)."""
    for p in module.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)


class TPGroup:
    """A module's tensor-parallel group: None and size 1 without TP;
    ``sequence`` with sequence parallelism (activations [b, s/t, h])."""

    def __init__(self, group: Any = None, size: int = 1, rank: int = 0,
                 sequence: bool = False) -> None:
        self.group, self.size, self.rank = group, size, rank
        self.sequence = sequence and size > 1


NO_TP = TPGroup()


class ShardParams(ParallelStyle):
    """A ParallelStyle that shards a module's parameters and nothing else:
    weights (and a column split's bias) along ``dim``, a row split's bias
    replicated. The kernels below do the collectives, so unlike
    ColwiseParallel / RowwiseParallel no hooks convert activations."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        def partition(name: str, mod: nn.Module, mesh: Any) -> None:
            for pname, p in list(mod.named_parameters(recurse=False)):
                place = Shard(self.dim) if p.dim() > self.dim else Replicate()
                mod.register_parameter(pname, nn.Parameter(
                    distribute_tensor(p, mesh, [place], src_data_rank=self.src_data_rank),
                    requires_grad=p.requires_grad))
        return distribute_module(module, device_mesh, partition)


def gather_seq(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """[b, s/t, ...] -> [b, s, ...], rank r's positions r s/t onwards: one
    new buffer, each sequence gathered straight into its rows (no
    [t, b, s/t, ...] staging copy)."""
    x = x.contiguous()
    out = x.new_empty(x.shape[0], x.shape[1] * tp.size, *x.shape[2:])
    for i in range(x.shape[0]):
        dist.all_gather_into_tensor(out[i], x[i], group=tp.group)
    return out


def scatter_seq(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """[b, s, ...] partial sums -> [b, s/t, ...] summed, a new buffer."""
    x = x.contiguous()
    out = x.new_empty(x.shape[0], x.shape[1] // tp.size, *x.shape[2:])
    for i in range(x.shape[0]):
        dist.reduce_scatter_tensor(out[i], x[i], group=tp.group)
    return out


def _sum_input_grad(dx: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    # f's backward: all-reduced in place, or reduce-scattered under SP.
    if tp.size == 1:
        return dx
    if tp.sequence:
        return scatter_seq(dx, tp)
    dist.all_reduce(dx, group=tp.group)
    return dx


class _ColumnFn(torch.autograd.Function):
    """Column-parallel projections of one input (memwall's column_matmul for
    one, column_parallel_linears for several: Llama's wq/wk/wv, w1/w3):
    y_i = x W_i^T (+ b_i). Saves x (the [b, s/t, h] shard under SP, gathered
    again in backward); the input's gradient is made by the first part,
    added to by the others, then summed over the ranks once."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, tp: TPGroup, *params: Any) -> tuple[torch.Tensor, ...]:
        ctx.set_materialize_grads(False)
        whole = gather_seq(x, tp) if tp.sequence else x
        x2 = whole.reshape(-1, whole.shape[-1])
        outs = []
        for weight, bias in zip(params[0::2], params[1::2]):
            w = local(weight)
            y = torch.addmm(local(bias), x2, w.t()) if bias is not None else x2 @ w.t()
            outs.append(y.view(*whole.shape[:-1], w.shape[0]))
        ctx.save_for_backward(x)
        ctx.tp, ctx.params, ctx.whole_shape = tp, params, whole.shape
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        tp, params = ctx.tp, ctx.params
        whole = gather_seq(x, tp) if tp.sequence else x
        x2 = whole.reshape(-1, whole.shape[-1])
        single = len(grads) == 1
        dx: torch.Tensor | None = None
        for g, weight, bias in zip(grads, params[0::2], params[1::2]):
            if g is None:
                continue
            g2 = g.reshape(-1, g.shape[-1])
            if ctx.needs_input_grad[0]:
                dx = g2 @ local(weight) if dx is None else dx.addmm_(g2, local(weight))
                if single:  # column_matmul sums it before the weight's gradient
                    dx = _sum_input_grad(dx.view(ctx.whole_shape), tp)
            _grad_of(weight).addmm_(g2.t(), x2)
            if bias is not None:
                _grad_of(bias).add_(g2.sum(0))  # out-features elements
        del whole, x2
        if dx is not None and not single:
            dx = _sum_input_grad(dx.view(ctx.whole_shape), tp)
        return (dx, None) + (None,) * len(params)


class _ScatterToSeqFn(torch.autograd.Function):
    """Partial sums [b, s, ...] reduce-scattered to [b, s/t, ...]; backward
    all-gathers the gradient. A node of its own, as Megatron's
    _ReduceScatterToSequenceParallelRegion: the [b, s/t, ...] gradient dies
    once gathered (memwall frees it after its last reader, the gather);
    inside the matmul's node autograd would hold it through that backward."""

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, tp: TPGroup) -> torch.Tensor:
        ctx.tp = tp
        return scatter_seq(partial, tp)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return gather_seq(g, ctx.tp), None


def sum_partials(partial: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """A row-parallel or vocabulary-parallel partial made whole: all-reduced
    in place (no autograd node touched it yet), or reduce-scattered."""
    if tp.size == 1:
        return partial
    if tp.sequence:
        return _ScatterToSeqFn.apply(partial, tp)
    with torch.no_grad():
        dist.all_reduce(partial, group=tp.group)
    return partial


class _RowFn(torch.autograd.Function):
    """Row-parallel partial x W^T (summed by sum_partials). Saves x; the
    gradient it gets is whole (gathered under SP)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        w = local(weight)
        ctx.save_for_backward(x)
        ctx.weight = weight
        return (x.reshape(-1, x.shape[-1]) @ w.t()).view(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, None]:
        (x,) = ctx.saved_tensors
        g2 = g.reshape(-1, g.shape[-1])
        w = local(ctx.weight)
        dx = (g2 @ w).view(x.shape) if ctx.needs_input_grad[0] else None
        _grad_of(ctx.weight).addmm_(g2.t(), x.reshape(-1, x.shape[-1]))
        return dx, None


class _BiasFn(torch.autograd.Function):
    """y + bias after a row-parallel sum (memwall's separate bias add)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.bias = bias
        return y + local(bias)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        _grad_of(ctx.bias).add_(g.reshape(-1, g.shape[-1]).sum(0))
        return g, None


def column(x: torch.Tensor, tp: TPGroup, linears: list[nn.Linear]) -> tuple[torch.Tensor, ...]:
    """Column-parallel (or, without TP, plain) projections sharing x."""
    params: list[Any] = []
    for lin in linears:
        params += [lin.weight, lin.bias]
    return _ColumnFn.apply(x, tp, *params)


def row(x: torch.Tensor, tp: TPGroup, lin: nn.Linear) -> torch.Tensor:
    """A row-parallel projection, its bias added once after the sum; without
    TP a plain linear (bias fused, as memwall's linear_layer)."""
    if tp.size == 1:
        return column(x, tp, [lin])[0]
    y = sum_partials(_RowFn.apply(x, lin.weight), tp)
    return _BiasFn.apply(y, lin.bias) if lin.bias is not None else y


class _EmbeddingFn(torch.autograd.Function):
    """Row lookup of a table, vocabulary-sharded when ``sharded`` (rows
    [start, start + rows) here, another rank's ids give zeros, the partial
    rows summed by sum_partials); the gradient rows are index_add-ed into
    the table's grad (no dense table-sized temporary, as memwall's
    embedding_backward)."""

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, weight: torch.Tensor, tp: TPGroup,
                sharded: bool) -> torch.Tensor:
        w = local(weight)
        ctx.weight, ctx.sharded = weight, sharded and tp.size > 1
        if not ctx.sharded:
            ctx.save_for_backward(ids)
            return F.embedding(ids, w)
        # Megatron's VocabParallelEmbedding masks (integers, not in memwall).
        start = tp.rank * w.shape[0]
        outside = (ids < start) | (ids >= start + w.shape[0])
        idx = (ids - start).masked_fill_(outside, 0)
        y = F.embedding(idx, w)
        y.masked_fill_(outside.unsqueeze(-1), 0)
        ctx.save_for_backward(idx, outside)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[None, None, None, None]:
        saved = ctx.saved_tensors
        g2 = g.reshape(-1, g.shape[-1])
        flat = saved[0].reshape(-1)
        if ctx.sharded:
            keep = ~saved[1].reshape(-1)
            flat, g2 = flat[keep], g2[keep]
        _grad_of(ctx.weight).index_add_(0, flat, g2)
        return None, None, None, None


class ParallelEmbedding(nn.Embedding):
    """nn.Embedding whose compute is _EmbeddingFn; ``vocab`` when
    ShardParams(0) splits its table by vocabulary rows (Megatron's
    VocabParallelEmbedding)."""

    def __init__(self, rows: int, dim: int, vocab: bool) -> None:
        super().__init__(rows, dim)
        self.split = "vocab" if vocab else None
        self.tp = NO_TP

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        y = _EmbeddingFn.apply(ids, self.weight, self.tp, self.split == "vocab")
        return sum_partials(y, self.tp) if self.split == "vocab" else y


class ParallelLinear(nn.Linear):
    """nn.Linear whose compute is _ColumnFn (``split`` "col") or _RowFn
    ("row"); the split is what ShardParams does to its weight."""

    def __init__(self, fan_in: int, fan_out: int, split: str, bias: bool = True) -> None:
        super().__init__(fan_in, fan_out, bias=bias)
        self.split = split
        self.tp = NO_TP

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if self.split == "row":
            return row(x, self.tp, self)
        return column(x, self.tp, [self])[0]


def tp_plan(module: nn.Module) -> dict[str, ParallelStyle]:
    """parallelize_module's plan: every split module's parameters sharded,
    by output rows (column and vocabulary splits) or input columns (row)."""
    return {name: ShardParams(1 if m.split == "row" else 0)
            for name, m in module.named_modules() if getattr(m, "split", None)}


def set_tp_group(module: nn.Module, tp: TPGroup) -> None:
    """Tell every module of a stage its tensor-parallel group."""
    for m in module.modules():
        if hasattr(m, "tp"):
            m.tp = tp


class _VocabParallelCE(torch.autograd.Function):
    """Mean cross-entropy over logits split by vocabulary across the TP group,
    kept as memwall's cross_entropy: fp32 log-probabilities saved; backward a
    dense gradient of them (nll_loss_backward), then log_softmax_backward."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, labels: torch.Tensor,
                tp: TPGroup) -> torch.Tensor:
        # Megatron's padded vocabulary rows stay in the softmax (as Megatron-LM).
        n, part = logits.shape
        shift = logits.max(dim=-1, keepdim=True).values
        if tp.size > 1:
            dist.all_reduce(shift, op=dist.ReduceOp.MAX, group=tp.group)
        lp = logits.float() - shift  # becomes the saved log-probabilities
        sums = torch.empty(n, 1, dtype=torch.float32, device=logits.device)
        for i in range(0, n, 16):  # exp a few rows at a time: no [N, V] temporary
            sums[i:i + 16] = lp[i:i + 16].exp().sum(dim=-1, keepdim=True)
        if tp.size > 1:
            dist.all_reduce(sums, group=tp.group)
        lp.sub_(sums.log_())
        local_label = labels - tp.rank * part
        ours = (local_label >= 0) & (local_label < part)
        idx = local_label.clamp(0, part - 1)
        total = -lp.gather(1, idx.unsqueeze(1)).squeeze(1).masked_fill(~ours, 0.0).sum()
        if tp.size > 1:
            dist.all_reduce(total, group=tp.group)
        ctx.save_for_backward(lp, idx, ours)
        return total / n

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        lp, idx, ours = ctx.saved_tensors
        n = lp.shape[0]
        dlp = torch.zeros_like(lp)  # nll_loss_backward's dense gradient
        dlp.scatter_(1, idx.unsqueeze(1), (ours.to(lp.dtype) * (-g / n)).unsqueeze(1))
        # log_softmax_backward: dx = dlp - exp(lp) * rowsum(dlp).
        dx = torch.exp(lp)
        dx.mul_(dlp.sum(dim=-1, keepdim=True)).neg_().add_(dlp)
        del dlp
        return dx, None, None


def vocab_parallel_loss(logits: torch.Tensor, labels: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Mean loss of [b, s, V/t] logits, shape [1] (pipelining concatenates
    the micro-batches' outputs)."""
    b, s, part = logits.shape
    return _VocabParallelCE.apply(logits.view(b * s, part), labels.reshape(-1), tp).view(1)


class Dropout(nn.Module):
    """Dropout as native_dropout: a bool mask saved, as memwall counts it and
    as CUDA runs it. On the CPU nn.Dropout takes the unfused path (input *
    a float noise tensor), which saves 4 bytes an element, not 1."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p <= 0:
            return x
        return torch.ops.aten.native_dropout(x, self.p, True)[0]


_MASKS: dict[tuple[int, str], torch.Tensor] = {}


def causal_mask(s: int, device: torch.device) -> torch.Tensor:
    # s x s booleans, made once (4 KiB at s=64; memwall fuses the mask).
    key = (s, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.ones(s, s, dtype=torch.bool, device=device).triu_(1)
    return _MASKS[key]


def scaled_masked_softmax(scores: torch.Tensor, head_dim: int) -> torch.Tensor:
    """softmax(mask(scores / sqrt(d))), scaled and masked in place (memwall
    fuses both into the softmax: scores transient, probabilities saved)."""
    scores.mul_(1.0 / math.sqrt(head_dim))
    scores.masked_fill_(causal_mask(scores.shape[-1], scores.device), float("-inf"))
    return torch.softmax(scores, dim=-1)
