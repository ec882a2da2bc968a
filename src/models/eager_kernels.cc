// Note [Eager kernels]
// The zoo models each normalization and activation as one fused kernel
// (apex's and Megatron's RMSNorm and bias-GELU, Liger's, torch's own
// F.gelu): it saves its input and recomputes what else backward needs.
// Hugging Face transformers' modules are plain torch instead, and eager
// PyTorch runs them kernel by kernel, each saving what its own backward
// reads. ModelOptions::eager_kernels models two of them as transformers 5
// writes them, so that a zoo graph can be set beside a traced one
// (docs/trace.md, "Hugging Face against the zoo"):
//
// - LlamaRMSNorm: x.to(fp32); pow(2).mean(-1) + eps; rsqrt; x * rstd;
//   .to(input dtype); weight * that. Saved: the fp32 copy of x (pow's and
//   the first mul's input; x itself in fp32), rstd, and the normalized
//   x^ in the input dtype (the weight multiply's). One more [.., h] tensor
//   than the fused kernel in fp32; in 16-bit, an fp32 copy and x^ instead
//   of x.
// - GPT-2's gelu_new (NewGELUActivation): 0.5 * x * (1 + tanh(sqrt(2/pi) *
//   (x + 0.044715 * x^3))). Saved: x (pow's), tanh's output, 0.5 x and
//   1 + tanh (the last multiply's operands): three [.., 4h] tensors more
//   than one GELU kernel.
//
// Each is modelled as one forward op that outputs what the eager kernels
// save (its other temporaries are workspace) and one backward op that reads
// it; the saved bytes are exact, the transient ones of the chain are
// approximated by a workspace of two of its largest temporaries.
#include <string>
#include <vector>

#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {

Tensor rms_norm_eager(Builder& b, std::string_view name, const Tensor& x) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  const int64_t h = x.shape.back();
  const std::vector<int64_t> rows(x.shape.begin(), x.shape.end() - 1);
  Tensor weight = b.param(n + ".weight", {h});
  const bool upcast = x.dtype != DType::kF32;
  const uint64_t fp32_bytes = checked_mul(static_cast<uint64_t>(x.numel()), 4, "RMSNorm bytes");
  std::vector<Builder::OutSpec> outs = {{n, x.shape, x.dtype, kAct},
                                        {n + ".rstd", rows, DType::kF32, kAct},
                                        {n + ".normalized", x.shape, x.dtype, kAct}};
  if (upcast) outs.push_back({n + ".fp32", x.shape, DType::kF32, kAct});
  // pow's output and the fp32 product before its cast are the chain's
  // temporaries.
  std::vector<Tensor> created = b.emit({.name = n,
                                        .type = "rms_norm_eager",
                                        .in = {x, weight},
                                        .workspace = 2 * fp32_bytes,
                                        .flops = 6 * numel_d(x)},
                                       outs);
  Tensor y = created[0];
  b.propagate_requires_grad({x, weight}, {y});
  // pow and the first mul read the fp32 input (x itself in fp32), rsqrt's
  // backward its output, the weight multiply x^ and the weight.
  std::vector<Tensor> saved = {upcast ? created[3] : x, created[1], created[2], weight};
  b.on_backward([&b, fq, x, y, saved, weight, fp32_bytes] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    std::vector<Tensor> in = {g};
    in.insert(in.end(), saved.begin(), saved.end());
    std::vector<Builder::OutSpec> dx_out;
    if (b.requires_grad(x)) dx_out.push_back({fq + ".grad_in", x.shape, g.dtype, kTmp});
    std::vector<Tensor> dx = b.emit_with_param_grads({.name = fq + ".bwd",
                                                      .type = "rms_norm_eager_backward",
                                                      .phase = Phase::kBackward,
                                                      .in = in,
                                                      .workspace = 2 * fp32_bytes,
                                                      .flops = 10 * numel_d(x)},
                                                     dx_out, {weight});
    if (!dx.empty()) b.add_grad(x, dx[0], fq);
  });
  return y;
}

Tensor gelu_new_eager(Builder& b, std::string_view name, const Tensor& x) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  std::vector<Tensor> created = b.emit({.name = n,
                                        .type = "gelu_new_eager",
                                        .in = {x},
                                        .workspace = 2 * x.bytes(),
                                        .flops = 9 * numel_d(x)},
                                       {{n, x.shape, x.dtype, kAct},
                                        {n + ".tanh", x.shape, x.dtype, kAct},
                                        {n + ".half", x.shape, x.dtype, kAct},
                                        {n + ".one_plus_tanh", x.shape, x.dtype, kAct}});
  Tensor y = created[0];
  b.propagate_requires_grad({x}, {y});
  const std::vector<Tensor> saved = {x, created[1], created[2], created[3]};
  b.on_backward([&b, fq, x, y, saved] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    std::vector<Tensor> in = {g};
    in.insert(in.end(), saved.begin(), saved.end());
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "gelu_new_eager_backward",
                         .phase = Phase::kBackward,
                         .in = in,
                         .workspace = 2 * x.bytes(),
                         .flops = 14 * numel_d(x)},
                        {fq + ".grad_in", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq);
  });
  return y;
}

}  // namespace memwall::models
