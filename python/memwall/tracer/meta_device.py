"""Building and running a model on the meta device.

Like ``with torch.device("meta")`` (which torch implements the same way),
but with a choice per factory: factory functions called without a device
(or with another one) create meta tensors, so a 7B model is "built"
without allocating its weights, and model code that calls
torch.arange/zeros in forward keeps working, while the factories below
that compute values stay on the CPU during construction.

While the step runs, the mode also stands in for the kernels a CUDA GPU
would run where they save other tensors than the meta device's (dropout,
scaled_dot_product_attention), and gives a meta convolution the output
layout the device would (``like_the_device``).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

# Factories that allocate a tensor's memory (parameters, buffers, inputs).
_ALLOCATING = ["empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint"]
# Factories that also compute values: architectures computed from tensors
# (torchvision's RegNet sizes its stages with torch.arange(...).tolist())
# need their values while the model is being built, so these stay on the CPU
# during construction (the tensors they create are small, and move to meta
# with the model afterwards).
_COMPUTING = ["arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor",
              "scalar_tensor", "tril_indices", "triu_indices", "randperm"]


class MetaDeviceMode(TorchFunctionMode):
    """Sends torch's factory functions to the meta device.

    `building`: while the model is built, the factories that compute values
    stay on the CPU (see _COMPUTING); while the step runs, every factory
    goes to meta. `kernels`: "cuda" makes dropout and
    scaled_dot_product_attention take the kernels a CUDA GPU runs."""

    def __init__(self, building: bool, kernels: str = "cuda") -> None:
        super().__init__()
        names = _ALLOCATING if building else _ALLOCATING + _COMPUTING
        self.factories: set[Callable[..., Any]] = {getattr(torch, n) for n in names
                                                   if hasattr(torch, n)}
        self.kernels = kernels

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in self.factories:
            kwargs["device"] = "meta"
        elif (func is torch.nn.functional.dropout and len(args) >= 1
              and self.kernels == "cuda"):
            # On CUDA, dropout is one native_dropout kernel keeping a bool
            # mask; on CPU and meta it is bernoulli + mul keeping a mask in
            # the input's dtype (4x the bytes in fp32). A trace for CUDA
            # kernels (the default) takes the CUDA path; --kernels cpu keeps
            # the CPU's.
            return cuda_dropout(*args, **kwargs)
        elif func is torch.nn.functional.scaled_dot_product_attention:
            if self.kernels == "cuda":
                return cuda_sdpa(*args, **kwargs)
            return cpu_sdpa(*args, **kwargs)
        return func(*args, **kwargs)


def to_meta(model: torch.nn.Module, batch: Any, optimizer: torch.optim.Optimizer) -> Any:
    """Moves what construction left on the CPU to the meta device; returns the
    batch on meta."""
    move_model(model, optimizer, torch.device("meta"))
    return torch.utils._pytree.tree_map(
        lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, batch)


def move_model(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               device: torch.device) -> None:
    """Moves the model to `device`. Module.to may replace a moved parameter
    with a new Parameter object (to meta it does; CPU to CUDA it keeps the
    object), so the optimizer's parameter lists and states are remapped by
    name."""
    before = dict(model.named_parameters())
    every = list(model.named_parameters(remove_duplicate=False))
    model.to(device)
    _tie_again(model, every)
    after = dict(model.named_parameters())
    moved = {id(before[n]): after[n] for n in before if before[n] is not after[n]}
    if moved:
        for group in optimizer.param_groups:
            group["params"] = [moved.get(id(p), p) for p in group["params"]]
        for p in [p for p in optimizer.state if id(p) in moved]:
            optimizer.state[moved[id(p)]] = optimizer.state.pop(p)


def _tie_again(model: torch.nn.Module, every: list[tuple[str, torch.nn.Parameter]]) -> None:
    """Module.to gives each module that held a shared parameter (a head
    tied to its embedding) a Parameter of its own: the moved model shares
    them again, as the model did."""
    moved: dict[int, torch.nn.Parameter] = {}
    for name, p in every:
        path, _, attr = name.rpartition(".")
        module = model.get_submodule(path)
        if id(p) in moved:
            module._parameters[attr] = moved[id(p)]
        else:
            moved[id(p)] = module._parameters[attr]


def cuda_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    """Note [Attention backends]: scaled_dot_product_attention picks its
    kernel per device. On meta (and the CPU) it takes the math path, which
    for 16-bit inputs computes in fp32 and saves the [b, heads, s, s]
    probabilities; on a CUDA GPU (sm80 and later) torch's sdp_utils tries
    FlashAttention first (16-bit, no mask, head dim <= 256 and a multiple
    of 8; grouped KV heads with enable_gqa), then the memory-efficient
    kernel (also fp32 and an additive mask; equal head counts), and only
    then the math path. Both fused kernels save their output and one fp32
    log-sum-exp per row, not the probabilities. A trace for CUDA kernels
    calls the kernel CUDA would."""
    d = query.shape[-1]
    shapes_ok = (query.dim() == 4 and key.dim() == 4 and value.dim() == 4
                 and key.shape[-1] == d and value.shape[-1] == d)
    same_heads = shapes_ok and key.shape[1] == query.shape[1] and value.shape[1] == query.shape[1]
    half = query.dtype in (torch.float16, torch.bfloat16)
    if (shapes_ok and attn_mask is None and half and d <= 256 and d % 8 == 0
            and (same_heads or enable_gqa)):
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if (shapes_ok and same_heads and (half or query.dtype == torch.float32)
            and d % (8 if half else 4) == 0):
        bias = attn_mask
        if bias is not None and bias.dtype == torch.bool:
            # sdpa turns a boolean mask into an additive one first.
            bias = torch.zeros(bias.shape, dtype=query.dtype, device=bias.device).masked_fill(
                bias.logical_not(), float("-inf"))
        grad = query.requires_grad or key.requires_grad or value.requires_grad
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, grad, dropout_p, is_causal, scale=scale)[0]
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)


def _cpu_stand_in(t: torch.Tensor | None) -> torch.Tensor | None:
    """A CPU tensor of t's shape and dtype over a single row: what torch's
    kernel choice looks at (shapes, dtypes, the last dimension's stride)."""
    if t is None or t.dim() == 0:
        return None if t is None else torch.empty((), dtype=t.dtype)
    row = torch.empty(t.shape[-1], dtype=t.dtype)
    return row.as_strided(t.shape, [0] * (t.dim() - 1) + [1])


def cpu_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
             is_causal: bool = False, scale: float | None = None,
             enable_gqa: bool = False) -> torch.Tensor:
    """Note [Attention backends], the CPU's side: on the CPU
    scaled_dot_product_attention runs torch's flash kernel
    (_scaled_dot_product_flash_attention_for_cpu: no dropout, equal head
    counts, ...) where torch's own choice (torch._fused_sdp_choice, asked
    here with CPU stand-ins) says so, else the math path, which is also what
    the meta device takes. A trace for the CPU's kernels (memwall.Trainer's
    emulated device) must call the kernel the CPU would, or the replay
    differs from eager PyTorch in the last bits."""
    from torch.nn.attention import SDPBackend

    choice = torch._fused_sdp_choice(
        _cpu_stand_in(query), _cpu_stand_in(key), _cpu_stand_in(value),
        _cpu_stand_in(attn_mask), dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    if choice == int(SDPBackend.FLASH_ATTENTION):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)


def cuda_dropout(input: torch.Tensor, p: float = 0.5, training: bool = True,
                 inplace: bool = False) -> torch.Tensor:
    """F.dropout as CUDA runs it: one native_dropout kernel, a bool mask."""
    if not training or p == 0:
        return input
    out = torch.native_dropout(input, p, True)[0]
    if inplace:
        return input.copy_(out)
    return out


def like_the_device(func: Any, args: tuple, out: Any) -> Any:
    """The meta device's convolution returns a contiguous (NCHW) output
    whatever its input's layout, but oneDNN on the CPU
    (mkldnn_conv_use_channels_last) and cuDNN (cudnn_conv_suggest_memory_format)
    return a channels-last one when the input or the weight is channels-last
    (ConvNeXt's blocks after their LayerNorm2d). The layout decides which
    kernels run later and what scratch they take (cpu_scratch.py), so a
    meta output takes the layout the device would give it: same bytes,
    other strides."""
    if (func.overloadpacket.__name__ != "convolution" or not isinstance(out, torch.Tensor)
            or not out.is_meta or out.dim() != 4 or len(args) < 2):
        return out
    x, w = args[0], args[1]
    last = torch.channels_last
    if ((x.is_contiguous(memory_format=last) and not x.is_contiguous())
            or (w.is_contiguous(memory_format=last) and not w.is_contiguous())):
        if not out.is_contiguous(memory_format=last):
            return out.contiguous(memory_format=last)
    return out


# The normalisations whose CPU kernels give 16-bit statistics for 16-bit
# inputs (below).
_STATISTICS_IN_INPUT_DTYPE = ("native_layer_norm", "native_batch_norm")


def like_the_cpu(func: Any, args: tuple, out: Any) -> Any:
    """The meta kernels of layer norm and batch norm return their saved
    statistics (mean, inverse deviation) in fp32 whatever the input, as
    CUDA's kernels do; the CPU's give them the input's dtype unless the
    input is 16-bit and the weight or bias fp32 (layer_norm_cpu's and
    batch_norm_cpu's "mixed type": aten/src/ATen/native/layer_norm.cpp,
    Normalization.cpp, torch 2.x; checked against the CPU's outputs). A
    trace for the CPU's kernels takes the CPU's dtypes, which the
    backward's kernels check."""
    if (func.overloadpacket.__name__ not in _STATISTICS_IN_INPUT_DTYPE
            or not isinstance(out, tuple) or len(out) < 3 or len(args) < 3):
        return out
    x = args[0]
    half = (torch.float16, torch.bfloat16)
    if not isinstance(x, torch.Tensor) or x.dtype not in half:
        return out
    params = [a for a in args[1:3] if isinstance(a, torch.Tensor)]
    if any(p.dtype != x.dtype for p in params):
        return out  # mixed type: fp32 statistics
    stats = [t.to(x.dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
             for t in out[1:3]]
    return (out[0], *stats, *out[3:])
