"""The FLOP rules (memwall/tracer/flops.py) on exact shapes.

Golden values are computed by hand from the rules' formulas: a matmul of
[m, k] by [k, n] is 2 m n k FLOPs (m n dot products of length k, a multiply
and an add per term); a convolution is 2 x (output elements) x (Cin / groups)
x prod(kernel), plus one FLOP per output element for a bias. Where memwall
counts as torch.utils.flop_counter does (its mm_flop, bmm_flop,
conv_flop_count and sdpa_flop_count: no bias), the tests also check the
rule against torch's own counter (FlopCounterMode) on the same op.
"""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from memwall.tracer.flops import ZERO_FLOP_OPS, op_flops


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def torch_count(fn, *args):
    """FLOPs torch's FlopCounterMode counts for fn(*args)."""
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()


def test_mm_is_two_m_n_k():
    a, b = meta(8, 16), meta(16, 32)
    assert op_flops("mm", [a, b], [meta(8, 32)]) == 2 * 8 * 16 * 32 == 8192
    assert op_flops("mm", [a, b], []) == torch_count(torch.mm, torch.ones(8, 16),
                                                     torch.ones(16, 32))


def test_addmm_adds_the_bias_per_output_element():
    bias, a, b = meta(32), meta(8, 16), meta(16, 32)
    # 2 * 8 * 16 * 32 for the product, 8 * 32 bias adds
    assert op_flops("addmm", [bias, a, b], [meta(8, 32)]) == 8192 + 256
    assert torch_count(torch.addmm, torch.ones(32), torch.ones(8, 16), torch.ones(16, 32)) == 8192


def test_bmm_and_baddbmm():
    a, b = meta(4, 8, 16), meta(4, 16, 32)
    assert op_flops("bmm", [a, b], [meta(4, 8, 32)]) == 2 * 4 * 8 * 16 * 32 == 32768
    assert torch_count(torch.bmm, torch.ones(4, 8, 16), torch.ones(4, 16, 32)) == 32768
    out = meta(4, 8, 32)
    assert op_flops("baddbmm", [out, a, b], [out]) == 32768 + 4 * 8 * 32


def test_grouped_mm_counts_one_matmul_over_all_groups():
    # [S, K] x [E, K, N]: the tokens of all experts, 2 S K N
    assert op_flops("_grouped_mm", [meta(64, 16), meta(4, 16, 32)], [meta(64, 32)]) == \
        2 * 64 * 16 * 32
    # the weight gradient: [K, S] x [S, N] -> [E, K, N], 2 K S N
    assert op_flops("_grouped_mm", [meta(16, 64), meta(64, 32)], [meta(4, 16, 32)]) == \
        2 * 16 * 64 * 32
    # [E, M, K] x [E, K, N]: E matmuls
    assert op_flops("_grouped_mm", [meta(4, 8, 16), meta(4, 16, 32)], [meta(4, 8, 32)]) == \
        2 * 4 * 8 * 16 * 32
    # [E, M, K] x [K, N_all]: 2 K per output element
    assert op_flops("_grouped_mm", [meta(4, 8, 16), meta(16, 32)], [meta(4, 8, 32)]) == \
        2 * (4 * 8 * 32) * 16


def conv_args(x, w, bias, transposed=False, groups=1):
    # aten::convolution(input, weight, bias, stride, padding, dilation,
    #                   transposed, output_padding, groups)
    return [x, w, bias, [1, 1], [1, 1], [1, 1], transposed, [0, 0], groups]


def test_convolution():
    x, w = meta(2, 16, 8, 8), meta(32, 16, 3, 3)
    y = meta(2, 32, 8, 8)
    macs = y.numel() * 16 * 9  # each output element: Cin * 3 * 3 terms
    assert op_flops("convolution", conv_args(x, w, None), [y]) == 2 * macs == 1179648
    assert op_flops("convolution", conv_args(x, w, meta(32)), [y]) == 2 * macs + y.numel()
    real = torch_count(lambda a, b: torch.nn.functional.conv2d(a, b, padding=1),
                       torch.ones(2, 16, 8, 8), torch.ones(32, 16, 3, 3))
    assert real == 1179648


def test_grouped_and_transposed_convolution():
    # groups=4: w is [Cout, Cin / 4, 3, 3], each output element sums 4 * 9 terms
    x, w, y = meta(2, 16, 8, 8), meta(32, 4, 3, 3), meta(2, 32, 8, 8)
    assert op_flops("convolution", conv_args(x, w, None, groups=4), [y]) == \
        2 * y.numel() * 4 * 9
    # transposed: w is [Cin, Cout / groups, kh, kw]; every input element is
    # scattered into Cout * kh * kw outputs
    x, w, y = meta(2, 8, 4, 4), meta(8, 16, 2, 2), meta(2, 16, 8, 8)
    flops = op_flops("convolution", conv_args(x, w, None, transposed=True), [y])
    assert flops == 2 * x.numel() * 16 * 4 == 32768
    real = torch_count(lambda a, b: torch.nn.functional.conv_transpose2d(a, b, stride=2),
                       torch.ones(2, 8, 4, 4), torch.ones(8, 16, 2, 2))
    assert real == 32768


def test_convolution_backward_counts_each_gradient_asked_for():
    g, x, w = meta(2, 32, 8, 8), meta(2, 16, 8, 8), meta(32, 16, 3, 3)
    macs = g.numel() * 16 * 9

    def args(mask):
        # convolution_backward(grad_output, input, weight, bias_sizes, stride,
        #   padding, dilation, transposed, output_padding, groups, output_mask)
        return [g, x, w, [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask]

    assert op_flops("convolution_backward", args([True, True, True]), []) == \
        4 * macs + g.numel()
    assert op_flops("convolution_backward", args([False, True, False]), []) == 2 * macs
    assert op_flops("convolution_backward", args([False, False, True]), []) == g.numel()


def test_attention_forward_and_backward():
    # QK^T and PV, each 2 * b * heads * s_q * s_k * d
    q, k, v = meta(2, 4, 16, 8), meta(2, 4, 32, 8), meta(2, 4, 32, 8)
    forward = op_flops("_scaled_dot_product_flash_attention", [q, k, v], [])
    assert forward == 2 * (2 * 4) * 16 * 32 * (8 + 8) == 131072
    # (on meta tensors: the CPU has no memory-efficient kernel)
    real = torch_count(torch.ops.aten._scaled_dot_product_efficient_attention, q, k, v, None,
                       False)
    assert real == forward
    grad = meta(2, 4, 16, 8)
    assert op_flops("_scaled_dot_product_flash_attention_backward", [grad, q, k, v], []) == \
        2 * forward


@pytest.mark.parametrize("name", ["clone", "copy_", "cat", "view", "embedding", "zero_"])
def test_memory_ops_have_no_flops(name):
    assert name in ZERO_FLOP_OPS
    assert op_flops(name, [meta(128, 64)], [meta(128, 64)]) == 0.0


def test_other_ops_count_their_largest_operand():
    # an elementwise op or a reduction: one FLOP per element of the largest
    assert op_flops("relu", [meta(4, 256)], [meta(4, 256)]) == 1024.0
    assert op_flops("sum", [meta(4, 256), [1]], [meta(4)]) == 1024.0
    assert op_flops("add", [meta(4, 256), 1.0], [meta(4, 256)]) == 1024.0
