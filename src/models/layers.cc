#include "layers.h"

#include <string>
#include <utility>

#include "lora.h"
#include "memwall/base/error.h"

namespace memwall::models {

std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

namespace {

// Backward of an elementwise op y = f(x) whose kernel reads `saved` (none
// when invalid) and the output gradient: dx = f'(saved) * g.
void elementwise_backward(Builder& b, const std::string& fq, const std::string& type,
                          const Tensor& x, const Tensor& y, const Tensor& saved,
                          double flops_per_element) {
  b.on_backward([&b, fq, type, x, y, saved, flops_per_element] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    std::vector<Tensor> in = {g};
    if (saved.valid()) in.push_back(saved);
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = type + "_backward",
                         .phase = Phase::kBackward,
                         .in = in,
                         .flops = flops_per_element * numel_d(x)},
                        {fq + ".grad_in", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq);
  });
}

}  // namespace

Tensor elementwise(Builder& b, std::string_view name, const std::string& type, const Tensor& x,
                   double fwd_flops, double bwd_flops, Saves saves) {
  std::string fq = b.qualified(name);
  Tensor y =
      b.emit1({.name = std::string(name), .type = type, .in = {x}, .flops = fwd_flops * numel_d(x)},
              {std::string(name), x.shape, x.dtype, kAct});
  b.propagate_requires_grad({x}, {y});
  const Tensor saved = saves == Saves::kInput ? x : saves == Saves::kOutput ? y : Tensor{};
  elementwise_backward(b, fq, type, x, y, saved, bwd_flops);
  return y;
}

Tensor linear(Builder& b, std::string_view name, const Tensor& x, const Tensor& weight,
              const Tensor& bias) {
  const int64_t in_features = weight.shape.at(1);
  const int64_t out_features = weight.shape.at(0);
  if (x.shape.empty() || x.shape.back() != in_features) {
    fail("model: linear {} expects {} input features", b.qualified(name), in_features);
  }
  const double rows = numel_d(x) / static_cast<double>(in_features);
  const double mm_flops = 2.0 * rows * static_cast<double>(in_features * out_features);
  std::string fq = b.qualified(name);
  std::vector<Tensor> ins = {x, weight};
  if (bias.valid()) ins.push_back(bias);
  Tensor y =
      b.emit1({.name = std::string(name),
               .type = "matmul",
               .in = ins,
               .flops = mm_flops + (bias.valid() ? rows * static_cast<double>(out_features) : 0)},
              {std::string(name), with_last(x.shape, out_features), b.compute_dtype(), kAct});
  b.propagate_requires_grad({x, weight, bias}, {y});
  b.on_backward([&b, fq, x, weight, bias, y, mm_flops, rows, out_features] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    // Order as in PyTorch's AddmmBackward0: input gradient, then weight.
    if (b.requires_grad(x)) {
      Tensor dx = b.emit1({.name = fq + ".bwd_input",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = {g, weight},
                           .flops = mm_flops},
                          {fq + ".grad_in", x.shape, g.dtype, kTmp});
      b.add_grad(x, dx, fq);
    }
    std::vector<Tensor> params = {weight};
    if (bias.valid()) params.push_back(bias);
    b.emit_with_param_grads(
        {.name = fq + ".bwd_weight",
         .type = "matmul",
         .phase = Phase::kBackward,
         .in = {g, x},
         .flops = mm_flops + (bias.valid() ? rows * static_cast<double>(out_features) : 0)},
        {}, params);
  });
  return y;
}

Tensor linear_layer(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                    bool with_bias, LinearRole role) {
  std::string n(name);
  Tensor y;
  // bitsandbytes quantizes every nn.Linear but the output head
  // (transformers' get_keys_to_not_convert).
  if (b.options().base_weights == WeightFormat::kNf4 && role == LinearRole::kBlock) {
    y = nf4_linear(b, name, x, out_features, with_bias);
  } else {
    Tensor w = b.param(n + ".weight", {out_features, x.shape.back()});
    Tensor bias = with_bias ? b.param(n + ".bias", {out_features}) : Tensor{};
    y = linear(b, name, x, w, bias);
  }
  if (role == LinearRole::kBlock && lora_adapts(b.options().lora, name)) {
    y = lora_adapter(b, name, x, y);
  }
  return y;
}

Tensor add(Builder& b, std::string_view name, const Tensor& x, const Tensor& y) {
  std::string fq = b.qualified(name);
  Tensor z = b.emit1({.name = std::string(name), .type = "add", .in = {x, y}, .flops = numel_d(x)},
                     {std::string(name), x.shape, x.dtype, kAct});
  b.propagate_requires_grad({x, y}, {z});
  // The gradient passes through unchanged to both operands (no kernel).
  b.on_backward([&b, fq, x, y, z] {
    Tensor g = b.grad(z);
    b.add_grad(x, g, fq + ".lhs");
    b.add_grad(y, g, fq + ".rhs");
  });
  return z;
}

Tensor mul(Builder& b, std::string_view name, const Tensor& x, const Tensor& y) {
  std::string fq = b.qualified(name);
  Tensor z = b.emit1({.name = std::string(name), .type = "mul", .in = {x, y}, .flops = numel_d(x)},
                     {std::string(name), x.shape, x.dtype, kAct});
  b.propagate_requires_grad({x, y}, {z});
  b.on_backward([&b, fq, x, y, z] {
    Tensor g = b.grad(z);
    if (!g.valid()) return;
    // d/dx (x*y) = g*y and d/dy = g*x: each reads the other operand.
    // Autograd's MulBackward0 holds both saved operands until it has made
    // both gradients, so the second kernel keeps the first's operand alive
    // too (read for its lifetime only: its traffic is its own operands').
    // Measured in docs/torch-layout.md ("(C)").
    const std::pair<Tensor, Tensor> operands[] = {{x, y}, {y, x}};
    const char* suffix[] = {".bwd_lhs", ".bwd_rhs"};
    const bool both = b.requires_grad(x) && b.requires_grad(y) && x.id != y.id;
    for (int i = 0; i < 2; ++i) {
      const auto& [self, other] = operands[i];
      if (!b.requires_grad(self)) continue;
      std::vector<Tensor> in = {g, other};
      const double traffic =
          static_cast<double>(g.bytes() + other.bytes() + Tensor{-1, self.shape, g.dtype}.bytes());
      if (both && i == 1) in.push_back(self);  // y, the first kernel's operand
      Tensor d = b.emit1({.name = fq + suffix[i],
                          .type = "mul",
                          .phase = Phase::kBackward,
                          .in = in,
                          .flops = numel_d(self),
                          .bytes = traffic},
                         {fq + suffix[i] + ".grad_in", self.shape, g.dtype, kTmp});
      b.add_grad(self, d, fq + suffix[i]);
    }
  });
  return z;
}

// GELU (tanh or erf form) costs ~8 flops forward and ~12 backward per element.
Tensor gelu(Builder& b, std::string_view name, const Tensor& x) {
  return elementwise(b, name, "gelu", x, 8, 12, Saves::kInput);
}

Tensor gelu_tanh(Builder& b, std::string_view name, const Tensor& x) {
  if (b.options().eager_kernels) return gelu_new_eager(b, name, x);
  return gelu(b, name, x);
}

// SiLU x*sigmoid(x): ~4 flops forward, ~6 backward per element.
Tensor silu(Builder& b, std::string_view name, const Tensor& x) {
  return elementwise(b, name, "silu", x, 4, 6, Saves::kInput);
}

// Out of place, so the op stays recomputable; backward reads the output as
// threshold_backward does. (torchvision's inplace ReLU saves one transient
// copy but the same saved bytes: batch norm's backward reads its input, not
// its output, so the pre-ReLU tensor dies at the ReLU either way.)
Tensor relu(Builder& b, std::string_view name, const Tensor& x) {
  return elementwise(b, name, "relu", x, 1, 1, Saves::kOutput);
}

Tensor dropout(Builder& b, std::string_view name, const Tensor& x, double p) {
  if (p <= 0) return x;
  std::string fq = b.qualified(name);
  std::string n(name);
  std::vector<Tensor> outs =
      b.emit({.name = n, .type = "dropout", .in = {x}, .flops = 2 * numel_d(x)},
             {{n, x.shape, x.dtype, kAct}, {n + ".mask", x.shape, DType::kBool, kAct}});
  Tensor y = outs[0];
  Tensor mask = outs[1];
  b.propagate_requires_grad({x}, {y});
  // native_dropout_backward reads only the mask: dx = g * mask / (1 - p).
  elementwise_backward(b, fq, "dropout", x, y, mask, 2);
  return y;
}

namespace {

// Shared by layer_norm and rms_norm: both save their input and fp32 per-row
// statistics, and their backward reads those plus the scale.
Tensor norm(Builder& b, std::string_view name, const std::string& type, const Tensor& x,
            bool with_shift) {
  std::string n(name);
  std::string fq = b.qualified(name);
  const int64_t h = x.shape.back();
  const std::vector<int64_t> rows(x.shape.begin(), x.shape.end() - 1);
  Tensor weight = b.param(n + ".weight", {h});
  Tensor bias = with_shift ? b.param(n + ".bias", {h}) : Tensor{};
  std::vector<Tensor> ins = {x, weight};
  std::vector<Builder::OutSpec> outs = {{n, x.shape, x.dtype, kAct}};
  if (with_shift) {
    ins.push_back(bias);
    outs.push_back({n + ".mean", rows, DType::kF32, kAct});
  }
  outs.push_back({n + ".rstd", rows, DType::kF32, kAct});
  // ~5 flops per element forward (mean, variance, normalize, scale, shift).
  std::vector<Tensor> created =
      b.emit({.name = n, .type = type, .in = ins, .flops = 5 * numel_d(x)}, outs);
  Tensor y = created[0];
  b.propagate_requires_grad({x, weight, bias}, {y});
  std::vector<Tensor> saved = {x};
  saved.insert(saved.end(), created.begin() + 1, created.end());
  saved.push_back(weight);
  b.on_backward([&b, fq, type, x, y, saved, weight, bias] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    std::vector<Tensor> in = {g};
    in.insert(in.end(), saved.begin(), saved.end());
    std::vector<Builder::OutSpec> dx_out;
    if (b.requires_grad(x)) dx_out.push_back({fq + ".grad_in", x.shape, g.dtype, kTmp});
    std::vector<Tensor> params = {weight};
    if (bias.valid()) params.push_back(bias);
    std::vector<Tensor> dx = b.emit_with_param_grads({.name = fq + ".bwd",
                                                      .type = type + "_backward",
                                                      .phase = Phase::kBackward,
                                                      .in = in,
                                                      .flops = 8 * numel_d(x)},
                                                     dx_out, params);
    if (!dx.empty()) b.add_grad(x, dx[0], fq);
  });
  return y;
}

}  // namespace

Tensor layer_norm(Builder& b, std::string_view name, const Tensor& x) {
  return norm(b, name, "layer_norm", x, /*with_shift=*/true);
}

Tensor rms_norm(Builder& b, std::string_view name, const Tensor& x) {
  if (b.options().eager_kernels) return rms_norm_eager(b, name, x);
  return norm(b, name, "rms_norm", x, /*with_shift=*/false);
}

Tensor embedding(Builder& b, std::string_view name, const Tensor& ids, const Tensor& table) {
  std::string fq = b.qualified(name);
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(table.shape.at(1));
  Tensor y = b.emit1({.name = std::string(name), .type = "embedding", .in = {ids, table}},
                     {std::string(name), shape, table.dtype, kAct});
  b.propagate_requires_grad({table}, {y});
  // embedding_dense_backward scatters the gradient rows into a dense table
  // gradient: it reads the gradient and the indices.
  b.on_backward([&b, fq, ids, table, y] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    b.emit_with_param_grads({.name = fq + ".bwd",
                             .type = "embedding_backward",
                             .phase = Phase::kBackward,
                             .in = {g, ids},
                             .flops = numel_d(g)},
                            {}, {table});
  });
  return y;
}

Tensor cross_entropy(Builder& b, std::string_view name, const Tensor& logits,
                     const Tensor& labels) {
  std::string n(name);
  std::string fq = b.qualified(name);
  // Autocast runs cross_entropy in fp32: a 16-bit input is first upcast.
  const uint64_t upcast =
      logits.dtype == DType::kF32
          ? 0
          : checked_mul(static_cast<uint64_t>(logits.numel()), 4, "cross-entropy upcast");
  // log_softmax ~5 flops per element (max, sub, exp, sum, log), nll 1.
  std::vector<Tensor> outs =
      b.emit({.name = n,
              .type = "cross_entropy",
              .in = {logits, labels},
              .workspace = upcast,
              .flops = 6 * numel_d(logits)},
             {{n, {}, DType::kF32, kAct}, {n + ".log_probs", logits.shape, DType::kF32, kAct}});
  Tensor loss = outs[0];
  Tensor log_probs = outs[1];
  b.propagate_requires_grad({logits}, {loss});
  // Two backward kernels, as PyTorch runs cross_entropy (log_softmax, then
  // nll_loss; aten/src/ATen/native/LossNLL.cpp): nll_loss_backward reads the
  // labels and writes a dense fp32 gradient of the log-probabilities
  // (zeros_like, then a scatter of -g at the labels); log_softmax_backward
  // (softmax - that gradient's row sums) reads it and the saved
  // log-probabilities. Both [N, V] gradients are live during the second
  // kernel; the fp32 gradient of the upcast logits is cast back to the
  // logits' dtype (workspace). Cross-checked against a traced GPT-2
  // (docs/trace.md).
  b.on_backward([&b, fq, logits, labels, log_probs, loss, upcast] {
    Tensor g = b.grad(loss);
    if (!g.valid() || !b.requires_grad(logits)) return;
    Tensor dlp = b.emit1({.name = fq + ".nll_bwd",
                          .type = "nll_loss_backward",
                          .phase = Phase::kBackward,
                          .in = {g, labels},
                          .flops = numel_d(logits)},
                         {fq + ".grad_log_probs", logits.shape, DType::kF32, kTmp});
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "log_softmax_backward",
                         .phase = Phase::kBackward,
                         .in = {dlp, log_probs},
                         .workspace = upcast,
                         .flops = 3 * numel_d(logits)},
                        {fq + ".grad_in", logits.shape, logits.dtype, kTmp});
    b.add_grad(logits, dx, fq);
  });
  return loss;
}

Tensor add_losses(Builder& b, std::string_view name, const Tensor& a, const Tensor& c) {
  return add(b, name, a, c);
}

}  // namespace memwall::models
