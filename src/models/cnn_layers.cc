#include "cnn_layers.h"

#include <string>
#include <utility>

#include "memwall/base/error.h"

namespace memwall::models {
namespace {

double numel_d(const std::vector<int64_t>& shape) {
  return static_cast<double>(checked_numel(shape));
}

// Traffic from the tensors' own sizes, not their buffers': a gradient may be
// a view of a larger buffer (concat_channels) and only its slice is touched.
double traffic(const std::vector<Tensor>& read, const std::vector<Builder::OutSpec>& written) {
  double sum = 0;
  for (const Tensor& t : read) sum += static_cast<double>(t.bytes());
  for (const Builder::OutSpec& o : written) {
    sum += numel_d(o.shape) * static_cast<double>(dtype_size(o.dtype));
  }
  return sum;
}

// Writes of parameter gradients: a first contribution writes the gradient,
// a later one (AccumulateGrad) reads and writes it.
double param_grad_traffic(const Builder& b, const std::vector<Tensor>& params) {
  double sum = 0;
  for (const Tensor& p : params) {
    if (!b.requires_grad(p)) continue;
    sum += (b.grad(p).valid() ? 2.0 : 1.0) * static_cast<double>(p.bytes());
  }
  return sum;
}

void require_nchw(const Builder& b, std::string_view name, const Tensor& x) {
  if (x.shape.size() != 4) {
    fail("model: {} expects an NCHW input, got {} dimensions", b.qualified(name), x.shape.size());
  }
}

// Forward and backward of a convolution-like op y = conv(x, w) + bias doing
// `macs` multiply-adds. convolution_backward computes the input gradient from
// g and the weight, and the weight (and bias) gradient from g and the input;
// cuDNN runs them as separate kernels, input gradient first. The input
// gradient is skipped when x does not require grad (the image).
Tensor conv_like(Builder& b, std::string_view name, const std::string& type, const Tensor& x,
                 const Tensor& weight, const Tensor& bias, std::vector<int64_t> out_shape,
                 double macs) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const double bias_flops = bias.valid() ? numel_d(out_shape) : 0;
  std::vector<Tensor> ins = {x, weight};
  if (bias.valid()) ins.push_back(bias);
  const std::vector<Builder::OutSpec> outs = {{n, std::move(out_shape), b.compute_dtype(), kAct}};
  Tensor y = b.emit1({.name = n,
                      .type = type,
                      .in = ins,
                      .flops = 2 * macs + bias_flops,
                      .bytes = traffic(ins, outs)},
                     outs[0]);
  b.propagate_requires_grad({x, weight, bias}, {y});
  b.on_backward([&b, fq, type, x, weight, bias, y, macs, bias_flops] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    if (b.requires_grad(x)) {
      const std::vector<Tensor> in = {g, weight};
      const std::vector<Builder::OutSpec> out = {{fq + ".grad_in", x.shape, g.dtype, kTmp}};
      Tensor dx = b.emit1({.name = fq + ".bwd_input",
                           .type = type + "_backward_input",
                           .phase = Phase::kBackward,
                           .in = in,
                           .flops = 2 * macs,
                           .bytes = traffic(in, out)},
                          out[0]);
      b.add_grad(x, dx, fq);
    }
    std::vector<Tensor> params = {weight};
    if (bias.valid()) params.push_back(bias);
    const std::vector<Tensor> in = {g, x};
    b.emit_with_param_grads({.name = fq + ".bwd_weight",
                             .type = type + "_backward_weight",
                             .phase = Phase::kBackward,
                             .in = in,
                             .flops = 2 * macs + bias_flops,
                             .bytes = traffic(in, {}) + param_grad_traffic(b, params)},
                            {}, params);
  });
  return y;
}

// Sum over PyTorch's adaptive-pooling bins of their sizes along one side:
// bin i covers [floor(i*in/out), ceil((i+1)*in/out)).
int64_t adaptive_bin_sum(int64_t in, int64_t out) {
  int64_t sum = 0;
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = (i * in) / out;
    const int64_t end = ((i + 1) * in + out - 1) / out;
    sum += end - start;
  }
  return sum;
}

}  // namespace

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                      int64_t dilation) {
  if (kernel < 1 || stride < 1 || padding < 0 || dilation < 1) {
    fail("model: bad window (kernel {}, stride {}, padding {}, dilation {})", kernel, stride,
         padding, dilation);
  }
  const int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0) fail("model: a {}-wide window does not fit a side of {}", kernel, in);
  return span / stride + 1;
}

Tensor conv2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_channels,
              int64_t kernel, const Conv2dOptions& options) {
  require_nchw(b, name, x);
  const int64_t batch = x.shape[0];
  const int64_t in_channels = x.shape[1];
  const int64_t groups = options.groups;
  if (groups < 1 || in_channels % groups != 0 || out_channels % groups != 0) {
    fail("model: conv {} has {} groups for {} -> {} channels", b.qualified(name), groups,
         in_channels, out_channels);
  }
  const int64_t h =
      conv_out_size(x.shape[2], kernel, options.stride, options.padding, options.dilation);
  const int64_t w =
      conv_out_size(x.shape[3], kernel, options.stride, options.padding, options.dilation);
  const std::string n(name);
  Tensor weight = b.param(n + ".weight", {out_channels, in_channels / groups, kernel, kernel});
  Tensor bias = options.bias ? b.param(n + ".bias", {out_channels}) : Tensor{};
  // Each output element is a dot product over Cin/groups * k * k inputs.
  const double macs = numel_d({batch, out_channels, h, w}) *
                      static_cast<double>(in_channels / groups * kernel * kernel);
  return conv_like(b, name, "conv2d", x, weight, bias, {batch, out_channels, h, w}, macs);
}

Tensor conv_transpose2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_channels,
                        int64_t kernel, int64_t stride, bool bias) {
  require_nchw(b, name, x);
  if (kernel < 1 || stride < 1 || out_channels < 1) {
    fail("model: bad transposed conv {}", b.qualified(name));
  }
  const int64_t batch = x.shape[0];
  const int64_t in_channels = x.shape[1];
  // (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
  const int64_t h = (x.shape[2] - 1) * stride + kernel;
  const int64_t w = (x.shape[3] - 1) * stride + kernel;
  const std::string n(name);
  Tensor weight = b.param(n + ".weight", {in_channels, out_channels, kernel, kernel});
  Tensor b_param = bias ? b.param(n + ".bias", {out_channels}) : Tensor{};
  // Each input element scatters into Cout * k * k outputs.
  const double macs = numel_d(x) * static_cast<double>(out_channels * kernel * kernel);
  return conv_like(b, name, "conv_transpose2d", x, weight, b_param, {batch, out_channels, h, w},
                   macs);
}

Tensor batch_norm(Builder& b, std::string_view name, const Tensor& x) {
  require_nchw(b, name, x);
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const int64_t channels = x.shape[1];
  Tensor weight = b.param(n + ".weight", {channels});
  Tensor bias = b.param(n + ".bias", {channels});
  const std::vector<Tensor> ins = {x, weight, bias};
  // The batch statistics are fp32 whatever the input dtype (cuDNN and
  // native_batch_norm accumulate in fp32 and save the mean and 1/std).
  const std::vector<Builder::OutSpec> outs = {{n, x.shape, x.dtype, kAct},
                                              {n + ".save_mean", {channels}, DType::kF32, kAct},
                                              {n + ".save_invstd", {channels}, DType::kF32, kAct}};
  // ~5 flops per element (statistics, normalize, scale, shift), as layer_norm.
  std::vector<Tensor> created = b.emit({.name = n,
                                        .type = "batch_norm",
                                        .in = ins,
                                        .flops = 5 * numel_d(x),
                                        .bytes = traffic(ins, outs)},
                                       outs);
  Tensor y = created[0];
  Tensor mean = created[1];
  Tensor invstd = created[2];
  b.propagate_requires_grad({x, weight, bias}, {y});
  b.on_backward([&b, fq, x, y, mean, invstd, weight, bias] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    const std::vector<Tensor> in = {g, x, mean, invstd, weight};
    std::vector<Builder::OutSpec> out;
    if (b.requires_grad(x)) out.push_back({fq + ".grad_in", x.shape, g.dtype, kTmp});
    const std::vector<Tensor> params = {weight, bias};
    std::vector<Tensor> dx =
        b.emit_with_param_grads({.name = fq + ".bwd",
                                 .type = "batch_norm_backward",
                                 .phase = Phase::kBackward,
                                 .in = in,
                                 .flops = 8 * numel_d(x),
                                 .bytes = traffic(in, out) + param_grad_traffic(b, params)},
                                out, params);
    if (!dx.empty()) b.add_grad(x, dx[0], fq);
  });
  return y;
}

Tensor relu6(Builder& b, std::string_view name, const Tensor& x) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const std::vector<Builder::OutSpec> outs = {{n, x.shape, x.dtype, kAct}};
  Tensor y = b.emit1(
      {.name = n, .type = "relu6", .in = {x}, .flops = 2 * numel_d(x), .bytes = traffic({x}, outs)},
      outs[0]);
  b.propagate_requires_grad({x}, {y});
  // ReLU6 is hardtanh(0, 6); hardtanh_backward reads the input (PyTorch 1.13
  // even saves a clone of it when the op runs in place), not the output.
  b.on_backward([&b, fq, x, y] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    const std::vector<Tensor> in = {g, x};
    const std::vector<Builder::OutSpec> out = {{fq + ".grad_in", x.shape, g.dtype, kTmp}};
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "relu6_backward",
                         .phase = Phase::kBackward,
                         .in = in,
                         .flops = 2 * numel_d(x),
                         .bytes = traffic(in, out)},
                        out[0]);
    b.add_grad(x, dx, fq);
  });
  return y;
}

Tensor max_pool2d(Builder& b, std::string_view name, const Tensor& x, int64_t kernel,
                  int64_t stride, int64_t padding) {
  require_nchw(b, name, x);
  if (padding * 2 > kernel) {
    fail("model: max pool {} pads more than half its window", b.qualified(name));
  }
  const std::string n(name);
  const std::string fq = b.qualified(name);
  std::vector<int64_t> shape = {x.shape[0], x.shape[1],
                                conv_out_size(x.shape[2], kernel, stride, padding, 1),
                                conv_out_size(x.shape[3], kernel, stride, padding, 1)};
  const std::vector<Builder::OutSpec> outs = {{n, shape, x.dtype, kAct},
                                              {n + ".indices", shape, DType::kI64, kAct}};
  // One comparison per window element.
  std::vector<Tensor> created =
      b.emit({.name = n,
              .type = "max_pool2d",
              .in = {x},
              .flops = numel_d(shape) * static_cast<double>(kernel * kernel),
              .bytes = traffic({x}, outs)},
             outs);
  Tensor y = created[0];
  Tensor indices = created[1];
  b.propagate_requires_grad({x}, {y});
  // max_pool2d_with_indices_backward zero-fills the input gradient and
  // scatters g through the indices; autograd also holds the input, but for
  // its shape only (and in every zoo model it is a saved ReLU output anyway).
  b.on_backward([&b, fq, x, y, indices] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    const std::vector<Tensor> in = {g, indices};
    const std::vector<Builder::OutSpec> out = {{fq + ".grad_in", x.shape, g.dtype, kTmp}};
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "max_pool2d_backward",
                         .phase = Phase::kBackward,
                         .in = in,
                         .flops = numel_d(g),
                         .bytes = traffic(in, out)},
                        out[0]);
    b.add_grad(x, dx, fq);
  });
  return y;
}

Tensor adaptive_avg_pool2d(Builder& b, std::string_view name, const Tensor& x, int64_t out_h,
                           int64_t out_w) {
  require_nchw(b, name, x);
  if (out_h < 1 || out_w < 1) fail("model: bad pooled size for {}", b.qualified(name));
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const std::vector<int64_t> shape = {x.shape[0], x.shape[1], out_h, out_w};
  // One add per bin element and one divide per output; bins may overlap
  // (or repeat inputs when the output is larger than the input).
  const double flops = static_cast<double>(x.shape[0] * x.shape[1]) *
                           static_cast<double>(adaptive_bin_sum(x.shape[2], out_h)) *
                           static_cast<double>(adaptive_bin_sum(x.shape[3], out_w)) +
                       numel_d(shape);
  const std::vector<Builder::OutSpec> outs = {{n, shape, x.dtype, kAct}};
  Tensor y = b.emit1({.name = n,
                      .type = "adaptive_avg_pool2d",
                      .in = {x},
                      .flops = flops,
                      .bytes = traffic({x}, outs)},
                     outs[0]);
  b.propagate_requires_grad({x}, {y});
  // The backward spreads g evenly over each bin: it needs the input's shape,
  // not its values.
  b.on_backward([&b, fq, x, y, flops] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    const std::vector<Tensor> in = {g};
    const std::vector<Builder::OutSpec> out = {{fq + ".grad_in", x.shape, g.dtype, kTmp}};
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "adaptive_avg_pool2d_backward",
                         .phase = Phase::kBackward,
                         .in = in,
                         .flops = flops,
                         .bytes = traffic(in, out)},
                        out[0]);
    b.add_grad(x, dx, fq);
  });
  return y;
}

Tensor flatten(const Builder& b, const Tensor& x) {
  if (x.shape.size() != 4) fail("model: flatten expects an NCHW tensor");
  return b.view(x, {x.shape[0], x.shape[1] * x.shape[2] * x.shape[3]});
}

Tensor concat_channels(Builder& b, std::string_view name, const std::vector<Tensor>& xs) {
  if (xs.empty()) fail("model: concat {} of nothing", b.qualified(name));
  const std::string n(name);
  const std::string fq = b.qualified(name);
  std::vector<int64_t> shape = xs[0].shape;
  shape[1] = 0;
  for (const Tensor& x : xs) {
    require_nchw(b, name, x);
    if (x.shape[0] != shape[0] || x.shape[2] != shape[2] || x.shape[3] != shape[3] ||
        x.dtype != xs[0].dtype) {
      fail("model: concat {} of tensors of different shapes or dtypes", fq);
    }
    shape[1] += x.shape[1];
  }
  const std::vector<Builder::OutSpec> outs = {{n, shape, xs[0].dtype, kAct}};
  Tensor y = b.emit1({.name = n, .type = "concat", .in = xs, .bytes = traffic(xs, outs)}, outs[0]);
  for (const Tensor& x : xs) b.propagate_requires_grad({x}, {y});
  // CatBackward hands each input a narrow() view of g: no kernel, and the
  // whole of g stays alive until every slice is consumed. The builder tracks
  // gradients per buffer, so each input's gradient is g's buffer seen with
  // the input's shape.
  b.on_backward([&b, fq, xs, y] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    for (size_t i = 0; i < xs.size(); ++i) {
      b.add_grad(xs[i], Tensor{g.id, xs[i].shape, g.dtype}, fq + ".in" + std::to_string(i));
    }
  });
  return y;
}

}  // namespace memwall::models
