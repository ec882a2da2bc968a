// LoRA adapters and NF4-quantized base weights (QLoRA) for the zoo's
// transformers: what linear_layer (layers.cc) applies when ModelOptions asks.
#pragma once

#include <cstdint>
#include <string_view>

#include "builder.h"

namespace memwall::models {

// The LoRA target short name ("q", "k", "v", "o", "gate", "up", "down") of
// a block's linear layer, from the name the zoo's builders give it
// ("attn.wq", "w2", "attention.self.query", ...); "qkv" for GPT-2's fused
// projection (adapted when any of q, k, v is a target); empty for other
// layers (routers, poolers, heads).
std::string_view lora_target_of(std::string_view layer);
// Whether `options` puts an adapter on the layer named `layer`.
bool lora_adapts(const LoraOptions& options, std::string_view layer);

// peft's LoRA forward on top of the base layer's output `base_out`:
// base_out + (alpha / r) * lora_B(lora_A(x)), with trainable
// "<name>.lora_A.weight" [r, in] and "<name>.lora_B.weight" [out, r].
Tensor lora_adapter(Builder& b, std::string_view name, const Tensor& x, const Tensor& base_out);

// The bytes bitsandbytes stores for `elements` NF4 weights with double
// quantization: 4-bit codes, one 8-bit absmax per 64-element block and one
// fp32 absmax per 256 blocks (QLoRA, sec. 3: 4 + 8/64 + 32/(64*256) bits
// per parameter). Throws Error on overflow.
struct Nf4Layout {
  uint64_t codes = 0;    // packed 4-bit codes: ceil(elements / 2) bytes
  uint64_t absmax = 0;   // 8-bit block absmax: ceil(elements / 64)
  uint64_t absmax2 = 0;  // fp32 second-level absmax: ceil(absmax / 256)
  uint64_t bytes() const;
};
Nf4Layout nf4_layout(int64_t elements);

// A linear layer whose frozen weight [out, in] is stored in NF4 (bias, if
// any, in compute dtype): each matmul, forward and backward, first
// dequantizes the weight into a compute-dtype temporary.
Tensor nf4_linear(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                  bool with_bias);

}  // namespace memwall::models
