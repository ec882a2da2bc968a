// Layer functions of the CNN builders (NCHW tensors), in the style of
// layers.h: each emits its forward op(s) and pushes its backward ops onto the
// tape (builder.h, Note [Tape]). FLOPs count a multiply-add as 2; memory
// traffic is every operand read or written once, sized by the tensor's shape
// (a gradient may be a view of a larger buffer, see concat_channels).
//
// Saved tensors (what each backward reads) follow PyTorch's kernels:
//   conv2d, conv_transpose2d  grad-input: g and the weight; grad-weight: g and
//                             the input (convolution_backward)
//   batch_norm   input, fp32 save_mean and save_invstd per channel, weight
//                (native_batch_norm_backward / cudnn_batch_norm_backward)
//   max_pool2d   the int64 indices (max_pool2d_with_indices_backward)
//   adaptive_avg_pool2d  nothing but the gradient
//   relu6        the input (hardtanh_backward)
//   concat_channels  nothing: the input gradients are views of the output's
//
// BatchNorm running statistics are not modelled (docs/zoo-cnns.md): they are
// buffers, not parameters, 8 bytes per channel.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "builder.h"

namespace memwall::models {

// Output side of a convolution or pooling window, as PyTorch computes it
// (floor mode). Throws Error when the window does not fit (side < 1).
int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                      int64_t dilation);

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;  // == channels for depthwise
  bool bias = false;
};

// Square-kernel convolution of x [N, Cin, H, W]. Creates "<name>.weight"
// [Cout, Cin/groups, k, k] (and "<name>.bias" [Cout]).
Tensor conv2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_channels,
              int64_t kernel, const Conv2dOptions& options);

// Transposed convolution, no padding (U-Net's 2x2 stride-2 upsampling).
// Creates "<name>.weight" [Cin, Cout, k, k] and, with `bias`, "<name>.bias".
Tensor conv_transpose2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_channels,
                        int64_t kernel, int64_t stride, bool bias);

// Training-mode BatchNorm2d over the channel dimension; creates
// "<name>.weight" and "<name>.bias" [C].
Tensor batch_norm(Builder& b, std::string_view name, const Tensor& x);

// min(max(x, 0), 6), out of place.
Tensor relu6(Builder& b, std::string_view name, const Tensor& x);

// Max pooling with a square window (floor mode, no dilation).
Tensor max_pool2d(Builder& b, std::string_view name, const Tensor& x, int64_t kernel,
                  int64_t stride, int64_t padding);

// AdaptiveAvgPool2d to [out_h, out_w] with PyTorch's bins.
Tensor adaptive_avg_pool2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_h,
                           int64_t out_w);

// [N, C, H, W] -> [N, C*H*W]: a view, no op.
Tensor flatten(const Builder& b, const Tensor& x);

// torch.cat(xs, dim=1) of NCHW tensors with equal N, H, W.
Tensor concat_channels(Builder& b, std::string_view name, const std::vector<Tensor>& xs);

}  // namespace memwall::models
