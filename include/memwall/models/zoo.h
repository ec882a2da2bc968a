// The model zoo: builds one training iteration (forward, loss, backward,
// optimizer step) of a named real architecture as a Graph, or its forward
// pass alone (ModelOptions::forward_only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"

namespace memwall {

enum class Optimizer : uint8_t { kSgd, kMomentum, kAdam, kAdamW };

// fp32: everything in fp32. bf16/fp16: mixed precision as in Micikevicius et
// al. 2018 / ZeRO: 16-bit params, activations and grads, fp32 master weights
// kept with the optimizer states.
enum class Precision : uint8_t { kFp32, kBf16, kFp16 };

// LoRA (Hu et al. 2021) with peft's LoraConfig semantics: the named
// projections of every block get a low-rank adapter, y = W x + (alpha / r)
// B A x, A [r, in] and B [out, r] trainable; every base weight is frozen (no
// gradient, no optimizer state), and gradients still flow through the frozen
// weights to the adapters below them. docs/zoo-transformers.md.
struct LoraOptions {
  int64_t rank = 0;  // r; 0: no adapters (full fine-tuning)
  double alpha = 8;  // peft's default lora_alpha
  // Short names: q, k, v, o (attention), gate, up, down (MLP); peft's default
  // for Llama is q and v.
  std::vector<std::string> targets = {"q", "v"};
};

// How the frozen base weights of the blocks' linear layers are stored.
// kNf4: QLoRA (Dettmers et al. 2023): 4-bit NormalFloat in bitsandbytes'
// layout, 64-element blocks, double-quantized absmax; dequantized into a
// compute-dtype temporary per matmul (Note [NF4 weights] in src/models/lora.cc).
enum class WeightFormat : uint8_t { kDense, kNf4 };

// A zoo architecture at another shape: GPT-2's (learned positions, pre-LN
// blocks, GELU MLP of 4h, tied head: Megatron-LM's GPT models, as in
// Narayanan et al. 2021's weak-scaling table) or Llama's (RMSNorm, RoPE,
// grouped-query attention, SwiGLU: Llama 3 405B). 0 keeps the variant's own.
struct ModelShape {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;   // Llama: key-value heads (grouped-query attention)
  int64_t ffn = 0;        // Llama: the SwiGLU MLP's width
  int64_t vocab = 0;
  int64_t positions = 0;  // the context: the longest sequence
  bool given() const { return layers || hidden || heads || kv_heads || ffn || vocab || positions; }
};

struct ModelOptions {
  int64_t batch = 0;  // 0: the model's default
  int64_t seq = 0;    // sequence length (transformers); 0: default
  int64_t image = 0;  // image side in pixels (CNNs); 0: default
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  bool flash = false;  // fused flash attention (saves no s x s tensors)
  // The iteration's forward ops alone, loss included: no backward and no
  // optimizer step (an inference or evaluation pass), so no grads or
  // optimizer states either.
  bool forward_only = false;
  LoraOptions lora;
  WeightFormat base_weights = WeightFormat::kDense;
  // RMSNorm and GPT-2's GELU as the plain-torch kernels transformers' eager
  // modules run, not one fused kernel each (Note [Eager kernels] in
  // src/models/eager_kernels.cc).
  bool eager_kernels = false;
  // Megatron-LM tensor parallelism over this many ranks: the graph is one
  // rank's (Note [Tensor parallelism in the zoo] in
  // src/models/tensor_parallel.cc); the GPT-2 and Llama models.
  int64_t tensor_parallel = 1;
  // Korthikanti et al. 2022's sequence parallelism on top of it: norms,
  // dropouts and residuals split along the sequence.
  bool sequence_parallel = false;
  // Expert parallelism over this many data-parallel ranks (Mixtral): each
  // holds experts / e of every layer's experts, and tokens go to them and
  // back by all-to-all (Note [Expert parallelism in the zoo] in
  // src/models/expert_parallel.cc).
  int64_t expert_parallel = 1;
  // Context parallelism over this many ranks (GPT-2 and Llama, with
  // --flash): each holds 1/c of every sequence, and attention passes the
  // keys and values around them in a ring (Note [Context parallelism in the
  // zoo] in src/models/context_parallel.cc).
  int64_t context_parallel = 1;
  // The GPT-2 and Llama models: another shape (the graph name says it).
  ModelShape shape;
};

// The LoRA target short names, in the order peft's all-linear lists them.
const std::vector<std::string>& lora_target_names();
// "q,v" or "all" (every projection); throws Error on an unknown or repeated
// name, listing the known ones.
std::vector<std::string> parse_lora_targets(std::string_view list);

enum class ModelFamily : uint8_t { kDecoder, kEncoder, kCnn };

struct ModelInfo {
  std::string name;         // zoo key, e.g. "llama2-7b"
  std::string description;  // one line
  ModelFamily family = ModelFamily::kDecoder;
  int64_t default_batch = 1;
  int64_t default_seq = 0;    // transformers
  int64_t default_image = 0;  // CNNs
  int64_t max_seq = 0;        // transformers: context length of the release
  int64_t param_count = 0;    // published parameter count (cited in zoo sources)
  int64_t experts = 0;        // a mixture of experts' experts a layer; 0 for a dense model
};

// Every built-in model, in display order.
const std::vector<ModelInfo>& model_zoo();
// Throws Error for an unknown name (listing the known ones).
const ModelInfo& find_model(std::string_view name);

// Builds the training-iteration graph. Throws Error on an unknown model, a
// batch/seq/image that is zero, negative, out of range for the model, or that
// makes some size overflow.
Graph build_model(std::string_view name, const ModelOptions& options);

// Every dimension of a GPT-2 or Llama model under `options.shape` (0s the
// variant's own; GPT-2's kv_heads are its heads and its ffn 4h). Throws
// Error for the other models.
ModelShape full_model_shape(std::string_view name, const ModelOptions& options);

std::string_view to_string(Optimizer optimizer);
std::string_view to_string(Precision precision);
// Throw Error on unknown names. Accepted: sgd, momentum, adam, adamw;
// fp32, bf16, fp16.
Optimizer parse_optimizer(std::string_view name);
Precision parse_precision(std::string_view name);
// The dtype a precision's math runs in (mixed precision: the half type).
DType compute_dtype(Precision precision);

}  // namespace memwall
