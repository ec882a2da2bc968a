"""The kernel-scratch rules (memwall/tracer/scratch.py, cpu_scratch.py) on
exact shapes. Golden values are computed by hand from each rule's formula,
as its docstring and docs/cost-model.md ("Kernel scratch") state it; the
channel block is fixed at 16 (AVX-512's, where the rules were measured) or
8 (AVX2's) so that the results do not depend on the CPU running the tests.
"""
import pytest
import torch

from memwall.tracer import cpu_scratch
from memwall.tracer.scratch import (CUBLAS_DEFAULT_WORKSPACE, Scratch, any_device_workspace,
                                    as_scratch, cublas_workspace_bytes, pack, replay,
                                    scratch_first)

F32 = 4


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


@pytest.fixture
def block16(monkeypatch):
    monkeypatch.setattr(cpu_scratch, "_BLOCK", 16)


@pytest.fixture
def block8(monkeypatch):
    monkeypatch.setattr(cpu_scratch, "_BLOCK", 8)


# ---- replay, pack, scratch_first --------------------------------------------

def test_replay_of_scratch_only():
    # a, then b while a lives, a freed, c: the highest total is a + b.
    s = replay([("+", "a", 100), ("+", "b", 50), ("-", "a"), ("+", "c", 120), ("-", "b"),
                ("-", "c")])
    assert (s.workspace, s.span) == (170, 170)
    assert s.first == ()
    # Lifetimes in events: a [0, 1], b [1, 3], c [3, 4]; b lives longest
    # and goes first, at 0; a and c each clash with b only. 64-byte aligned
    # they would sit at 64 and reach 184 > span 170, so they are packed to
    # the byte: both at 50.
    assert s.at == ((100, 50), (50, 0), (120, 50))


def test_replay_counts_scratch_against_the_outputs():
    # y' (blocked output) + the plain output y made beside it: the workspace
    # is what the scratch adds to the outputs' bytes, y' here.
    s = replay([("+", "y'", 300), ("out", 200), ("-", "y'")])
    assert (s.workspace, s.span) == (300, 300)
    # an output made before its scratch: the scratch alone
    s = replay([("out", 200), ("+", "t", 100), ("-", "t")])
    assert (s.workspace, s.span) == (100, 100)
    # an output of the size of an earlier allocation comes after it
    s = replay([("+", "x'", 256), ("-", "x'"), ("out", 256)])
    assert s.first == ((256, 1),)


def test_pack_prefers_alignment_and_packs_tight_when_it_does_not_fit():
    # Two 100-byte allocations alive together: 64-byte aligned, the second
    # sits at 128 and reaches 228 > span 200, so they are packed to the byte.
    at, height = pack([("+", "a", 100), ("+", "b", 100), ("-", "a"), ("-", "b")], 200)
    assert (at, height) == (((100, 0), (100, 100)), 200)
    at, height = pack([("+", "a", 100), ("+", "b", 100), ("-", "a"), ("-", "b")], 228)
    assert (at, height) == (((100, 0), (100, 128)), 228)


def test_scratch_first_and_as_scratch():
    s = Scratch(10, 20, first=((256, 2), (64, 0)))
    assert scratch_first(s, [64, 256]) == [0, 2]
    assert scratch_first(s, [32]) is None
    assert as_scratch(7) == Scratch(7, 7, (), ())
    assert as_scratch(s) is s


# ---- device-independent rules, cuBLAS ---------------------------------------

def test_mse_loss_with_a_reduction_holds_the_unreduced_loss():
    x = meta(4, 256)
    assert any_device_workspace("mse_loss", [x, x, 1]) == 4 * 256 * F32  # mean
    assert any_device_workspace("mse_loss", [x, x]) == 4 * 256 * F32  # default: mean
    assert any_device_workspace("mse_loss", [x, x, 0]) == 0  # none: the output itself


def test_cublas_workspace():
    # CublasHandlePool.cpp's default ":4096:2:16:8": 4096 KiB x 2 + 16 KiB x 8
    assert CUBLAS_DEFAULT_WORKSPACE == 8_519_680
    assert cublas_workspace_bytes({}) == 8_519_680
    assert cublas_workspace_bytes({"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}) == 32 * 2**20
    assert cublas_workspace_bytes({"CUBLAS_WORKSPACE_CONFIG": ":16:8:4096:2"}) == 8_519_680


# ---- the CPU's rules --------------------------------------------------------

def conv(name, *args, threads=1):
    return as_scratch(cpu_scratch.cpu_workspace(name, list(args), threads))


def conv_forward(x, w, stride=1, padding=1, groups=1, threads=1):
    # aten::convolution(input, weight, bias, stride, padding, dilation,
    #                   transposed, output_padding, groups)
    return conv("convolution", x, w, None, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0],
                groups, threads=threads)


def test_conv_output_shape_is_torchs():
    x, w = torch.ones(2, 3, 17, 17), torch.ones(8, 3, 3, 3)
    for stride, padding, dilation in ((1, 1, 1), (2, 0, 1), (2, 2, 2)):
        y = torch.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation)
        assert cpu_scratch._conv_out_shape(x, w, [stride] * 2, [padding] * 2,
                                           [dilation] * 2) == list(y.shape)
    wt = torch.ones(3, 8, 2, 2)
    y = torch.nn.functional.conv_transpose2d(x, wt, stride=2)
    assert cpu_scratch._conv_out_shape(x, wt, [2, 2], [0, 0], [1, 1], True) == list(y.shape)


def test_which_convolutions_go_to_onednn():
    x, w = meta(1, 16, 64, 64), meta(16, 16, 1, 1)
    one = [1, 1]
    # ConvParams::use_mkldnn: not a 1x1 unstrided convolution of a batch
    # under 16 on one thread
    assert not cpu_scratch.cpu_uses_mkldnn(x, w, one, one, False, 1, 1)
    assert cpu_scratch.cpu_uses_mkldnn(x, w, one, one, False, 1, 2)
    # nor a tiny one: one image of 16 x 8 x 8 = 1,024 elements (<= 20,480),
    # a 3x3 kernel, no groups
    assert not cpu_scratch.cpu_uses_mkldnn(meta(1, 16, 8, 8), meta(16, 16, 3, 3), one, one,
                                           False, 1, 2)
    assert cpu_scratch.cpu_uses_mkldnn(meta(2, 16, 8, 8), meta(16, 16, 3, 3), one, one, False,
                                       1, 1)
    assert not cpu_scratch.cpu_uses_mkldnn(meta(2, 16, 8, 8, dtype=torch.bfloat16),
                                           meta(16, 16, 3, 3, dtype=torch.bfloat16), one, one,
                                           False, 1, 2)


def test_onednn_convolution_forward(block16):
    # x [2, 16, 8, 8] by w [32, 16, 3, 3], padding 1: y [2, 32, 8, 8].
    # x' = x (16 channels fill a block) = 8,192 B; w' = 32 x 16 x 9 x 4 =
    # 18,432 B; y' = y = 16,384 B. workspace max(x' + w' + y' - y, y') =
    # 26,624; span x' + w' + y' = 43,008.
    s = conv_forward(meta(2, 16, 8, 8), meta(32, 16, 3, 3))
    assert (s.workspace, s.span) == (26_624, 43_008)
    assert s.first == ((16_384, 1),)  # y comes after y', an allocation of its size
    # y' lives longest (0); x' above it, w' above both
    assert s.at == ((8_192, 16_384), (18_432, 24_576), (16_384, 0))


def test_onednn_convolution_pads_channels_to_the_block(block16):
    # 8 channels at 1x1 (strided, so oneDNN's): x' pads 8 to 16 channels.
    # y [2, 24, 4, 4]: y' pads 24 to 32. w' pads 24 to 32 outputs, 8 to 16
    # inputs. rtus: one image's strided input made dense, 16 x 16 x 4 B.
    x, w = meta(2, 8, 8, 8), meta(24, 8, 1, 1)
    s = conv_forward(x, w, stride=2, padding=0)
    xb, wb, rtus, yb = 2 * 16 * 64 * F32, 32 * 16 * F32, 16 * 16 * F32, 2 * 32 * 16 * F32
    y = 2 * 24 * 16 * F32
    assert (s.workspace, s.span) == (max(xb + wb + rtus + yb - y, yb), xb + wb + rtus + yb)
    assert (s.workspace, s.span) == (12_288, 15_360)


def test_avx2_weight_gradient_of_a_kernel_taller_than_its_input(block8):
    # With 8-channel blocks a 3x3 kernel over a 2x2 input falls back to a
    # GEMM for the weight gradient (_gemm_weight_pass): per thread 4 w and
    # one image's columns (Cin x 3 x 3 x Ho x Wo) and 256 B, then the plain
    # gw. Weight gradient only (mask [False, True, False]).
    g, x, w = meta(4, 8, 2, 2), meta(4, 8, 2, 2), meta(8, 8, 3, 3)
    s = conv("convolution_backward", g, x, w, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
             [False, True, False], threads=2)
    wb = 8 * 8 * 9 * F32
    held = 2 * (4 * wb + 8 * 9 * 4 * F32) + 256
    # w, then the GEMM's buffers, freed; w freed; gw made. The scratch's top
    # is w + held; counted against gw (as if it existed from the op's start,
    # Note [Workspace span]), the workspace is held.
    assert (s.workspace, s.span) == (held, wb + held) == (20_992, 23_296)


def test_native_convolution_unfolds_its_columns(block16):
    # One thread, batch 1, 3x3 with 3 channels: the native path (no oneDNN
    # for a batch of 1 unless it is large), columns [N, Cin*kh*kw, Ho*Wo].
    x, w = meta(1, 3, 4, 4), meta(4, 3, 3, 3)
    assert not cpu_scratch.cpu_uses_mkldnn(x, w, [1, 1], [1, 1], False, 1, 1)
    s = conv_forward(x, w)
    assert (s.workspace, s.span) == (1 * 27 * 16 * F32, 1 * 27 * 16 * F32)


def test_batch_norm():
    x = meta(8, 32, 4, 4)
    # training: per-channel sums of mean and variance in fp32
    assert conv("native_batch_norm", x, None, None, None, None, True, 0.1, 1e-5).workspace == \
        2 * 32 * F32
    # evaluation: nothing
    assert conv("native_batch_norm", x, None, None, None, None, False, 0.1, 1e-5).workspace == 0
    # backward in training: one input-sized buffer
    assert conv("native_batch_norm_backward", x, x, None, None, None, None, None, True, 1e-5,
                [True, True, True]).workspace == 8 * 32 * 16 * F32


def test_layer_norm():
    x = meta(4, 16, 64)
    assert conv("native_layer_norm", x, [64], None, None, 1e-5).workspace == 0
    strided = meta(4, 64, 16).transpose(1, 2)
    assert conv("native_layer_norm", strided, [64], None, None, 1e-5).workspace == \
        4 * 16 * 64 * F32
    # backward: per-thread rows for dgamma and dbeta, 2 x threads x 64 floats
    s = conv("native_layer_norm_backward", x, x, [64], None, None, None, None,
             [True, True, True], threads=3)
    assert s.workspace == 2 * 3 * 64 * F32


def test_binary_cross_entropy_with_logits():
    x = meta(16, 100)
    n = 16 * 100 * F32
    # log_sigmoid (n) and an input-sized buffer, then the unreduced loss:
    # 2n with a reduction; without one, the loss is the output.
    assert conv("binary_cross_entropy_with_logits", x, x, None, None, 1).workspace == 2 * n
    assert conv("binary_cross_entropy_with_logits", x, x, None, None, 0).workspace == 2 * n - n


def test_no_rule_no_scratch():
    assert cpu_scratch.cpu_workspace("relu", [meta(4, 4)], 1) == 0
