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
};

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
};

// Every built-in model, in display order.
const std::vector<ModelInfo>& model_zoo();
// Throws Error for an unknown name (listing the known ones).
const ModelInfo& find_model(std::string_view name);

// Builds the training-iteration graph. Throws Error on an unknown model, a
// batch/seq/image that is zero, negative, out of range for the model, or that
// makes some size overflow.
Graph build_model(std::string_view name, const ModelOptions& options);

std::string_view to_string(Optimizer optimizer);
std::string_view to_string(Precision precision);
// Throw Error on unknown names. Accepted: sgd, momentum, adam, adamw;
// fp32, bf16, fp16.
Optimizer parse_optimizer(std::string_view name);
Precision parse_precision(std::string_view name);

}  // namespace memwall
