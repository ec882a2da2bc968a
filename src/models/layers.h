// Layer functions shared by the zoo: each emits its forward op(s) and pushes
// the backward ops onto the tape (builder.h, Note [Tape]). FLOPs count a
// multiply-add as 2; memory traffic is every operand read or written once.
//
// Saved tensors (what each backward reads) follow PyTorch's kernels:
//   linear      input X (and the weight)                     dX = G W^T, dW = G^T X
//   layer_norm  input, mean and rstd (fp32, one per row)      native_layer_norm_backward
//   rms_norm    input and rstd (fp32, one per row)            fused RMSNorm (apex / flash-attn)
//   gelu, silu  input                                         gelu_backward
//   relu        output                                        threshold_backward
//   dropout     the 1-byte mask                               native_dropout_backward
//   add         nothing (the gradient passes through)
//   embedding   the indices                                   embedding_dense_backward
//   cross_entropy  log-probabilities (fp32) and labels        nll_loss / log_softmax backward
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "builder.h"

namespace memwall::models {

// `shape` with its last dimension replaced by `last`.
std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last);

// y = x W^T + b over the last dimension. `bias` may be invalid (no bias).
Tensor linear(Builder& b, std::string_view name, const Tensor& x, const Tensor& weight,
              const Tensor& bias);
// A block's projection or a model's output head: LoRA adapts and NF4
// quantizes block layers only (as peft's all-linear and bitsandbytes leave
// the head alone).
enum class LinearRole : uint8_t { kBlock, kHead };
// Creates weight [out, in] (and bias [out] when `with_bias`) then applies
// linear; with ModelOptions::base_weights NF4 the weight is quantized
// (nf4_linear), and a LoRA target gets its adapter (lora.h).
Tensor linear_layer(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                    bool with_bias, LinearRole role = LinearRole::kBlock);

// What an elementwise op's backward kernel reads besides the output gradient.
enum class Saves : uint8_t { kInput, kOutput, kNothing };
// y = f(x), one op of `type`; backward is one `<type>_backward` op reading
// the gradient and `saves`. FLOPs per element forward and backward.
Tensor elementwise(Builder& b, std::string_view name, const std::string& type, const Tensor& x,
                   double fwd_flops, double bwd_flops, Saves saves);

Tensor add(Builder& b, std::string_view name, const Tensor& x, const Tensor& y);
// Elementwise product of two tensors (saves both).
Tensor mul(Builder& b, std::string_view name, const Tensor& x, const Tensor& y);
Tensor gelu(Builder& b, std::string_view name, const Tensor& x);
// GPT-2's GELU (tanh form, transformers' gelu_new): one kernel, or the
// eight eager ones with ModelOptions::eager_kernels (Note [Eager kernels]).
Tensor gelu_tanh(Builder& b, std::string_view name, const Tensor& x);
Tensor silu(Builder& b, std::string_view name, const Tensor& x);
Tensor relu(Builder& b, std::string_view name, const Tensor& x);
// Inverted dropout; emits nothing when p == 0 (inference-style configs).
Tensor dropout(Builder& b, std::string_view name, const Tensor& x, double p);

// Normalizations over the last dimension, with learned scale (and shift for
// layer_norm). Create their own parameters "<name>.weight" / "<name>.bias".
Tensor layer_norm(Builder& b, std::string_view name, const Tensor& x);
// One fused kernel, or LlamaRMSNorm's eager ones with
// ModelOptions::eager_kernels (Note [Eager kernels] in eager_kernels.cc).
Tensor rms_norm(Builder& b, std::string_view name, const Tensor& x);
Tensor rms_norm_eager(Builder& b, std::string_view name, const Tensor& x);
Tensor gelu_new_eager(Builder& b, std::string_view name, const Tensor& x);

// Rows of `table` selected by integer `ids` (shape ids.shape + [dim]).
Tensor embedding(Builder& b, std::string_view name, const Tensor& ids, const Tensor& table);

// Mean cross-entropy of logits [N, C] against labels [N]; returns a scalar
// fp32 loss. Under mixed precision the logits are upcast to fp32 first
// (autocast runs cross_entropy in fp32): that copy is the op's workspace.
Tensor cross_entropy(Builder& b, std::string_view name, const Tensor& logits, const Tensor& labels);

// Sum of several scalar losses (e.g. BERT's MLM + NSP).
Tensor add_losses(Builder& b, std::string_view name, const Tensor& a, const Tensor& c);

}  // namespace memwall::models
