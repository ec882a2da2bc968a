"""FLOPs of aten ops from their shapes (docs/trace.md, "FLOP rules"): what
the recorder records as each op's `flops`. Shapes only, so meta tensors
(the trace) and real ones alike.

A matmul of [m, k] by [k, n] is m * n dot products of length k: m * n * k
multiply-adds, 2 m n k FLOPs (one multiply and one add each), as
torch.utils.flop_counter's mm_flop and bmm_flop count them; a convolution
is 2 * (output elements) * (Cin / groups) * prod(kernel), as its
conv_flop_count, and attention's two matmuls as its sdpa_flop_count.
memwall adds what they leave out: a bias (addmm, baddbmm, a convolution's)
is one FLOP per output element. python/tests/test_flops.py checks the rules
against hand-computed counts and against torch's counter.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch


def _numel(t: Any) -> int:
    return t.numel() if isinstance(t, torch.Tensor) else 0


def _prod(xs: Iterable[int]) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _conv_macs(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, transposed: bool) -> int:
    # Every output element of a convolution is a dot product over
    # Cin/groups * prod(kernel) inputs (w is [Cout, Cin/groups, *k]); a
    # transposed convolution scatters every input element into
    # Cout/groups * prod(kernel) outputs (w is [Cin, Cout/groups, *k]).
    k = _prod(w.shape[2:])
    if transposed:
        return x.numel() * w.shape[1] * k
    return out.numel() * w.shape[1] * k


def _attention_flops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> float:
    # QK^T and PV: 2 * b * heads * s_q * s_k * d each.
    batch_heads = _prod(q.shape[:-2])
    return 2.0 * batch_heads * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])


def op_flops(name: str, args: Sequence[Any], outs: Sequence[torch.Tensor]) -> float:
    """FLOPs of one aten op from its arguments (in schema order, as the
    dispatcher passes them) and its output tensors; `name` is the overload
    packet's, e.g. "addmm". Ops without a rule count one FLOP per element
    of their largest operand."""
    if name in ("mm", "matmul"):
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[-1]
    if name == "addmm":  # bias + a @ b: the zoo counts the bias add too
        a, b = args[1], args[2]
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1] + a.shape[0] * b.shape[1]
    if name == "bmm":
        a, b = args[0], args[1]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name == "baddbmm":
        a, b = args[1], args[2]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] + outs[0].numel()
    if name == "_grouped_mm":
        # One matmul per group of rows (a mixture of experts' tokens per
        # expert, offs marking the groups): the groups partition the rows,
        # so the work is that of one matmul over all of them.
        a, b = args[0], args[1]
        if a.dim() == 2 and b.dim() == 3:  # [S, K] x [E, K, N]
            return 2.0 * a.shape[0] * a.shape[1] * b.shape[2]
        if a.dim() == 2 and b.dim() == 2:  # weight gradient: [K, S] x [S, N] -> [E, K, N]
            return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        if a.dim() == 3 and b.dim() == 3:  # [E, M, K] x [E, K, N]
            return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        return 2.0 * outs[0].numel() * a.shape[-1]  # [E, M, K] x [K, N_all]: per output element
    if name in ("convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution",
                "_slow_conv2d_forward", "slow_conv3d_forward", "thnn_conv2d"):
        x, w = args[0], args[1]
        transposed = bool(args[6]) if name in ("convolution", "_convolution") else False
        bias = args[2] if len(args) > 2 and isinstance(args[2], torch.Tensor) else None
        return (2.0 * _conv_macs(x, w, outs[0], transposed)
                + (outs[0].numel() if bias is not None else 0))
    if name == "convolution_backward":
        g, x, w = args[0], args[1], args[2]
        transposed, mask = bool(args[7]), args[10]
        macs = _conv_macs(x, w, g, transposed)
        flops = 0.0
        if mask[0]:
            flops += 2.0 * macs  # input gradient
        if mask[1]:
            flops += 2.0 * macs  # weight gradient
        if mask[2]:
            flops += g.numel()  # bias gradient: a sum over g
        return flops
    if "attention" in name and "backward" not in name and len(args) >= 3:
        q, k, v = args[0], args[1], args[2]
        if all(isinstance(t, torch.Tensor) and t.dim() >= 3 for t in (q, k, v)):
            return _attention_flops(q, k, v)
    if "attention" in name and "backward" in name and len(args) >= 4:
        # The backward recomputes nothing and does twice the forward's matmuls.
        q, k, v = args[1], args[2], args[3]
        if all(isinstance(t, torch.Tensor) and t.dim() >= 3 for t in (q, k, v)):
            return 2.0 * _attention_flops(q, k, v)
    if name in ZERO_FLOP_OPS:
        return 0.0
    # Elementwise ops, reductions, norms, losses: one flop per element of the
    # largest operand (an approximation, documented as such).
    largest = 0
    for t in list(args) + list(outs):
        largest = max(largest, _numel(t))
    return float(largest)


# Ops that only move or create memory.
ZERO_FLOP_OPS: set[str] = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "clone",
    "copy_", "_to_copy", "cat", "stack", "contiguous", "index_select", "gather",
    "embedding", "constant_pad_nd", "repeat", "new_zeros", "zeros", "zeros_like", "zero_",
    "ones_like", "new_ones", "fill_", "full", "full_like", "scalar_tensor", "lift_fresh_copy",
    "bernoulli_", "slice_backward", "select_backward", "_unsafe_view", "masked_fill_",
    "detach", "alias", "expand", "t", "transpose", "permute", "view", "_reshape_alias",
}
