"""The CPU kernels' scratch rules (scratch.py says what scratch is): oneDNN's
convolutions and their reorders into blocked layouts, the native
convolution's columns, batch norm's and layer norm's buffers,
binary_cross_entropy_with_logits' temporaries. docs/cost-model.md
("Kernel scratch") gives each rule with its source and the measurements that
confirmed it. Shapes only, so meta tensors and real ones alike."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from memwall.tracer.scratch import Event, Rule, replay, tensor_bytes

Tensor = torch.Tensor

# oneDNN's convolutions keep activations and weights in layouts blocked by
# 16 channels on AVX-512 CPUs (nChw16c; the rules were measured on one) and
# by 8 on AVX2-only ones (nChw8c, unmeasured); /proc/cpuinfo decides, as
# oneDNN's dispatcher does.


def _cpu_block() -> int:
    try:
        with open("/proc/cpuinfo") as f:
            return 16 if "avx512f" in f.read() else 8
    except OSError:
        return 8


_BLOCK: int | None = None


def channel_block() -> int:
    """oneDNN's channel block on this CPU: 16 with AVX-512, else 8."""
    global _BLOCK
    if _BLOCK is None:
        _BLOCK = _cpu_block()
    return _BLOCK


def _blocked(t: Tensor, block: int) -> int:
    """Bytes of `t` ([N, C, ...]) in a layout padding C to `block`."""
    c = t.shape[1]
    padded = -(-c // block) * block
    return t.numel() // max(c, 1) * padded * t.element_size()


def _as_list(v: Any, n: int = 2) -> list[int]:
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v] + [int(v[-1])] * (n - len(v)) if v else [1] * n
    return [int(v)] * n


def cpu_uses_mkldnn(x: Tensor, w: Tensor, stride: Sequence[int], dilation: Sequence[int],
                    transposed: bool, groups: int, threads: int) -> bool:
    """PyTorch's ConvParams::use_mkldnn for a CPU tensor
    (aten/src/ATen/native/Convolution.cpp, torch 2.x): fp32 convolutions go
    to oneDNN unless a 1x1, unstrided, undilated convolution on one thread
    with a batch under 16 (where the native path is faster), or a tiny one."""
    if x.dim() != 4 or x.dtype != w.dtype or str(x.dtype) != "torch.float32":
        # bf16/fp16 use oneDNN only with AVX512-BF16/AMX (mkldnn_bf16_device_check).
        return False
    strided = any(s != 1 for s in stride)
    dilated = any(d != 1 for d in dilation)
    kh, kw = int(w.shape[-2]), int(w.shape[-1])
    n = int(x.shape[0])
    if not (strided or dilated or n >= 16 or kw != 1 or kh != 1 or threads > 1):
        return False
    return groups > 1 or (kw > 3 and kh > 3) or n > 1 or x.numel() > 20480


def _rtus_bytes(x: Tensor, w: Tensor, out_hw: int, stride: Sequence[int], groups: int,
                block: int) -> int:
    """oneDNN's 1x1 convolutions with a stride copy the strided input of one
    image into a dense buffer first ("reduce to unit stride"), one per
    thread (measured: 73,856 B at 2 threads for 36,864 B of one image)."""
    if tuple(w.shape[-2:]) != (1, 1) or all(s == 1 for s in stride) or groups > 1:
        return 0
    c = -(-int(x.shape[1]) // block) * block
    return c * out_hw * x.element_size()


def channels_last(x: Tensor) -> bool:
    """An input in NHWC order (ConvNeXt's blocks leave their activations so):
    oneDNN then reads and writes activations in place, without reorders."""
    return x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def _depthwise(x: Tensor, groups: int) -> bool:
    return groups > 1 and groups == int(x.shape[1])


def conv_forward_scratch(x: Tensor, w: Tensor, y: Tensor, stride: Sequence[int],
                         dilation: Sequence[int], transposed: bool, groups: int,
                         threads: int) -> Rule:
    """CPU convolution forward, a Scratch. oneDNN: the input reordered to the
    blocked layout (unless it has fewer channels than a block and the kernel
    is larger than 1x1: a first layer's RGB stays plain, a 1x1 convolution
    pads 8 channels to 16), the weight reordered, the output computed blocked
    (y'); then those are freed but y', the plain output y is allocated and
    y' reordered into it: workspace max(x' + w' + rtus + y' - y, y'), span
    x' + w' + rtus + y'. A transposed convolution (oneDNN's deconvolution)
    keeps its operands plain, computes into an output-sized buffer, then
    makes the output and one more output-sized buffer beside it (measured
    on 2x2 up-convolutions of 4-32 channels, with bias): workspace
    max(x + w', 2y), span max(x + w' + y, 2y). Its native path's columns are
    not modelled (0)."""
    if x.dim() != 4:
        return 0
    block = channel_block()
    if transposed and not cpu_uses_mkldnn(x, w, stride, dilation, transposed, groups, threads):
        return 0
    if cpu_uses_mkldnn(x, w, stride, dilation, transposed, groups, threads):
        if channels_last(x):
            # Only the weight is reordered; a dense convolution keeps a
            # second weight-sized buffer (measured: 2w + a few KB).
            return tensor_bytes(w) if _depthwise(x, groups) else 2 * tensor_bytes(w)
        yb = tensor_bytes(y)
        if transposed:
            return replay([("+", "x", tensor_bytes(x)), ("+", "w", tensor_bytes(w)),
                           ("+", "y'", yb), ("-", "x"), ("-", "w"), ("out", yb), ("+", "e", yb),
                           ("-", "y'"), ("-", "e")])
        out_hw = int(y.shape[2]) * int(y.shape[3])
        sp = threads * _rtus_bytes(x, w, out_hw, stride, groups, block)
        xb = _reordered_input(x, w, block)
        return replay([("+", "x'", xb), ("+", "w'", _blocked_weight(x, w, groups, block, xb > 0)),
                       ("+", "rtus", sp), ("+", "y'", _blocked(y, block)), ("-", "x'"),
                       ("-", "w'"), ("-", "rtus"), ("out", yb), ("-", "y'")])
    return _slow_columns(x, w, y, stride, dilation, groups)


def _blocked_weight(x: Tensor, w: Tensor, groups: int, block: int,
                    input_reordered: bool) -> int:
    """Bytes of a weight in oneDNN's blocked layout: a dense convolution pads
    its output channels to the block, and its input channels where it
    reorders the input (`input_reordered`); a depthwise one pads its groups
    (measured: 8 to 16 outputs of 16 inputs at 3x3, 9,216 B for 4,608;
    24 to 24 at 3x3, 36,864 B for 20,736). Other grouped weights: as they
    are."""
    kh, kw = int(w.shape[-2]), int(w.shape[-1])
    pad = lambda c: -(-int(c) // block) * block  # noqa: E731
    if _depthwise(x, groups):
        return pad(w.shape[0]) * kh * kw * w.element_size()
    if groups != 1:
        return tensor_bytes(w)
    i = int(x.shape[1])
    i = pad(i) if input_reordered else i
    return pad(w.shape[0]) * i * kh * kw * w.element_size()


def _reordered_input(x: Tensor, w: Tensor, block: int) -> int:
    """oneDNN reorders the activations to the blocked layout unless they
    have fewer channels than a block and the kernel is larger than 1x1 (its
    "first convolution" kernels read a plain RGB input); its 1x1 kernels
    have no such path and pad (measured: 1, 3 and 8 channels at 3x3 stay
    plain; 4 and 8 at 1x1 are padded to 16)."""
    one_by_one = tuple(int(k) for k in w.shape[-2:]) == (1, 1)
    return _blocked(x, block) if x.shape[1] >= block or one_by_one else 0


def _weight_pass_input(x: Tensor, w: Tensor, groups: int, block: int) -> int:
    """The input as the weight-gradient pass reorders it: as the forward
    does with 16-channel blocks (AVX-512). With 8 (AVX2), oneDNN's
    backward-by-weights kernel reads a plain input only when it has exactly
    3 channels (its "flat" case, jit_avx2_conv_kernel_f32.cpp) and pads any
    other dense input to the block (measured on an AVX2-only EPYC, torch
    2.14.1, one thread: 1, 2 and 4 to 7 input channels at 3x3 and 7x7 hold
    x padded to 8 channels and a weight gradient padded likewise, 3
    channels neither; the U-Net's first convolution, 1 channel at 3x3,
    9,439,200 B against 4,718,592 B before this rule)."""
    if block == 8 and groups == 1:
        return 0 if int(x.shape[1]) == 3 else _blocked(x, block)
    return _reordered_input(x, w, block)


def _gemm_weight_pass(x: Tensor, w: Tensor, groups: int, block: int) -> bool:
    """With 8-channel blocks (AVX2), oneDNN's blocked backward-by-weights
    kernel refuses a kernel taller than the input or 14 or more wide
    (jit_avx2_conv_kernel_f32.cpp, its [bwd_w:r2] and kw < 14 conditions),
    and the weight gradient falls back to a GEMM over plain layouts
    (ResNet-18 at 64x64, whose last stage is 2x2 under 3x3 kernels). Its
    depthwise kernel does too when the kernel is taller than the input
    (MobileNetV2 at 64x64: 960 channels at 2x2 under 3x3; at 4x4 it does
    not; kw >= 14 not measured). Not measured with 16-channel blocks."""
    if block != 8:
        return False
    kh, kw = int(w.shape[-2]), int(w.shape[-1])
    if _depthwise(x, groups):
        return kh > int(x.shape[2])
    return groups == 1 and (kh > int(x.shape[2]) or kw >= 14)


def _image_columns(x: Tensor, w: Tensor, y: Tensor) -> int:
    """One image's im2col columns: Cin * kh * kw * Ho * Wo elements."""
    return (int(w.shape[1]) * int(w.shape[-2]) * int(w.shape[-1]) * int(y.shape[2])
            * int(y.shape[3]) * x.element_size())


def _slow_columns(x: Tensor, w: Tensor, y: Tensor, stride: Sequence[int],
                  dilation: Sequence[int], groups: int) -> int:
    """The native path (ConvolutionMM2d.cpp) unfolds the input into columns
    [N, Cin*kh*kw, Ho*Wo] unless the convolution is 1x1, unstrided and
    unpadded, when it multiplies the input directly."""
    kh, kw = int(w.shape[-2]), int(w.shape[-1])
    if kh == 1 and kw == 1 and all(s == 1 for s in stride):
        return 0
    return (int(x.shape[0]) * int(w.shape[1]) * groups * kh * kw * int(y.shape[2])
            * int(y.shape[3]) * x.element_size())


def conv_backward_scratch(g: Tensor, x: Tensor, w: Tensor, stride: Sequence[int],
                          dilation: Sequence[int], transposed: bool, groups: int,
                          mask: Sequence[bool], threads: int) -> Rule:
    """CPU convolution_backward (mkldnn_convolution_backward), a Scratch. Two
    oneDNN passes, each with reorders into blocked layouts:
    - input gradient: g' + w' + gi', then g' and w' freed and the plain gi
      made beside gi' (a strided convolution holds one more input-sized
      buffer);
    - weight gradient: g' + x' + gw' (x' as the forward reorders it), then
      the plain gw beside gw'.
    In memwall's terms (scratch on top of the outputs gi and gw) the
    workspace is max(data pass - gi - gw, g' + x', w'), the span the data
    pass's g' + w' + gi' or the weight pass's g' + x' + gw'. Transposed
    convolutions alike (measured on the U-Net's up-convolutions: g' + x')."""
    if x.dim() != 4:
        return 0
    block = channel_block()
    if not cpu_uses_mkldnn(x, w, stride, dilation, transposed, groups, threads):
        if transposed:
            return 0
        return _slow_columns(x, w, g, stride, dilation, groups) if mask[0] or mask[1] else 0
    # A strided gradient (a slice of a concatenation's gradient: DenseNet's
    # last layer of each block) is first made contiguous, held for the whole op.
    # oneDNN's deconvolution reorders such a gradient without the copy when
    # its channels do not fill whole blocks (measured on the U-Net's
    # up-convolutions, whose gradients are slices: 8 channels without a copy,
    # 16 with one).
    copies = 0 if g.is_contiguous() or channels_last(g) else tensor_bytes(g)
    if transposed and int(g.shape[1]) % block != 0:
        copies = 0
    if channels_last(x):
        return copies + _channels_last_backward(x, w, groups)
    if _depthwise(x, groups) and int(w.shape[-2]) * int(w.shape[-1]) > 9:
        # oneDNN's depthwise kernels larger than 3x3 (EfficientNet's 5x5)
        # hold one input-sized buffer (measured: x, or x - w when strided).
        return copies + tensor_bytes(x)
    # A deconvolution's weight is reordered as it is (measured: 8,192 B for 32x16x2x2).
    wb = tensor_bytes(w) if transposed else _blocked_weight(x, w, groups, block,
                                                      _reordered_input(x, w, block) > 0)
    gb = _blocked(g, block)
    events: list[Event] = [("+", "copy", copies)]
    if mask[0]:
        gi = tensor_bytes(x)
        events += [("+", "g'", gb), ("+", "w'", wb), ("+", "gi'", _blocked(x, block)),
                   ("-", "w'"), ("-", "g'")]
        # A strided convolution's input-sized buffer comes before the
        # gradient and goes after it (measured on ResNet-18's layer4.0.conv1
        # through the executor's allocation log).
        if any(s != 1 for s in stride) and not _depthwise(x, groups):
            events += [("+", "strided", gi), ("out", gi), ("-", "strided")]
        else:
            events += [("out", gi)]
        events += [("-", "gi'")]
    if mask[1]:
        def blocked_pass(xb: int, gwb: int) -> list[Event]:
            return [("+", "g'", gb), ("+", "x'", xb), ("+", "gw'", gwb), ("-", "x'"), ("-", "g'"),
                    ("out", tensor_bytes(w)), ("-", "gw'")]
        if transposed:  # as measured on the U-Net's up-convolutions (g' + x')
            events += blocked_pass(_reordered_input(x, w, block), wb)
        elif _gemm_weight_pass(x, w, groups, block):
            # Measured (one and two threads, 1 to 512 channels, 1x1 to 2x2
            # outputs): w, then per thread 4w and one image's columns, and
            # 256 B, all freed before the plain gw is made. Depthwise (one,
            # two and four threads: 138,640, 277,024 and 553,792 B for 960
            # channels at 2x2, b8): the same, but w is freed after gw.
            held = threads * (4 * tensor_bytes(w) + _image_columns(x, w, g)) + 256
            gw = [("out", tensor_bytes(w))]
            events += [("+", "w", tensor_bytes(w)), ("+", "gemm", held), ("-", "gemm")]
            events += gw + [("-", "w")] if _depthwise(x, groups) else [("-", "w")] + gw
        else:
            xb = _weight_pass_input(x, w, groups, block)
            events += blocked_pass(xb, _blocked_weight(x, w, groups, block, xb > 0))
    return replay(events + [("-", "copy")])


# The ops with a rule here (cpu_workspace).
CPU_RULES: set[str] = {"convolution", "convolution_backward", "native_batch_norm",
             "native_batch_norm_backward", "native_layer_norm", "native_layer_norm_backward",
             "binary_cross_entropy_with_logits"}


def _channels_last_backward(x: Tensor, w: Tensor, groups: int) -> int:
    """convolution_backward on NHWC activations (measured, torch 2.14.1,
    AVX-512): a dense convolution holds three weight-sized buffers; a
    depthwise one two and a per-channel fp32 row, except that kernels larger
    than 3x3 take oneDNN's path that keeps 256 floats per weight element."""
    wb = tensor_bytes(w)
    if not _depthwise(x, groups):
        return 3 * wb
    c = int(x.shape[1])
    taps = int(w.shape[-2]) * int(w.shape[-1])
    if taps > 9:
        return c * taps * 256 * w.element_size() + wb + 4 * c
    return 2 * wb + 4 * c


def cpu_workspace(name: str, args: Sequence[Any], threads: int) -> Rule:
    """Scratch of one CPU aten op (overload packet name, its arguments):
    bytes, or a Scratch where the span differs; 0 for ops without a rule."""
    tensor = torch.Tensor
    if name == "convolution" and len(args) >= 9:
        x, w = args[0], args[1]
        if not (isinstance(x, tensor) and isinstance(w, tensor)):
            return 0
        stride, dilation = _as_list(args[3]), _as_list(args[5])
        y_shape = _conv_out_shape(x, w, stride, _as_list(args[4]), dilation, bool(args[6]),
                                  _as_list(args[7]), int(args[8]))
        y = torch.empty(y_shape, dtype=x.dtype, device="meta")
        return conv_forward_scratch(x, w, y, stride, dilation, bool(args[6]), int(args[8]),
                                    threads)
    if name == "convolution_backward" and len(args) >= 11:
        g, x, w = args[0], args[1], args[2]
        return conv_backward_scratch(g, x, w, _as_list(args[4]), _as_list(args[6]),
                                     bool(args[7]), int(args[9]), list(args[10]), threads)
    if name == "binary_cross_entropy_with_logits" and len(args) >= 2 and (
            len(args) < 4 or args[3] is None):
        # Loss.cpp: log_sigmoid(input) (its CPU kernel also fills an
        # input-sized buffer, freed on return), then (1 - target) * input
        # - log_sigmoid: the loss, the output itself without a reduction
        # (measured: 2 x the input's bytes with mean or sum, 1x with none).
        n = tensor_bytes(args[0])
        reduced = len(args) < 5 or int(args[4]) != 0
        return replay([("+", "log_sigmoid", n), ("+", "buffer", n), ("-", "buffer")]
                      + ([("+", "loss", n), ("-", "loss")] if reduced else [("out", n)])
                      + [("-", "log_sigmoid")])
    if name == "native_batch_norm" and len(args) >= 6 and args[5]:
        # batch_norm_cpu_update_stats_template: per-channel mean and variance
        # sums in the accumulation type (fp32; fp64 for fp64) before the
        # saved mean and inverse deviation are written.
        x = args[0]
        acc = 8 if x.dtype == torch.float64 else 4
        return 2 * int(x.shape[1]) * acc if x.dim() >= 2 else 0
    if name == "native_batch_norm_backward" and len(args) >= 8 and args[7]:
        # batch_norm_backward_cpu_template (training): one input-sized
        # buffer (empty_like) beside the input gradient.
        return tensor_bytes(args[1])
    if name == "native_layer_norm" and len(args) >= 2:
        # layer_norm_cpu: a contiguous copy of a strided input (ConvNeXt's
        # permuted LayerNorm2d).
        return 0 if args[0].is_contiguous() else tensor_bytes(args[0])
    if name == "native_layer_norm_backward" and len(args) >= 3:
        # layer_norm_backward_cpu: contiguous copies of a strided input or
        # gradient, and per-thread rows for dgamma and dbeta.
        g, x, normalized = args[0], args[1], args[2]
        d = 1
        for s in normalized:
            d *= int(s)
        acc = 8 if x.dtype == torch.float64 else 4
        copies = ((0 if x.is_contiguous() else tensor_bytes(x))
                  + (0 if g.is_contiguous() else tensor_bytes(g)))
        return copies + 2 * threads * d * acc
    return 0


def _conv_out_shape(x: Tensor, w: Tensor, stride: Sequence[int], padding: Sequence[int],
                    dilation: Sequence[int], transposed: bool = False,
                    output_padding: Sequence[int] = (0, 0), groups: int = 1) -> list[int]:
    """The output's shape (torch.nn.Conv2d and ConvTranspose2d's formulas)."""
    if transposed:  # weight [Cin, Cout / groups, kh, kw]
        shape = [int(x.shape[0]), int(w.shape[1]) * groups]
        for i in range(2, x.dim()):
            j = i - 2
            shape.append((int(x.shape[i]) - 1) * stride[j] - 2 * padding[j]
                         + dilation[j] * (int(w.shape[i]) - 1) + output_padding[j] + 1)
        return shape
    shape = [int(x.shape[0]), int(w.shape[0])]
    for i in range(2, x.dim()):
        k = int(w.shape[i])
        j = i - 2
        shape.append((int(x.shape[i]) + 2 * padding[j] - dilation[j] * (k - 1) - 1)
                     // stride[j] + 1)
    return shape
