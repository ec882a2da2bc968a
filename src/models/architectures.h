// Builders of the zoo's architectures (one file per family). Each validates
// its options (throwing Error) and returns the finished training-iteration
// graph with meta filled in by the caller (zoo.cc).
#pragma once

#include <string_view>

#include "builder.h"

namespace memwall::models {

// `variant` is the zoo name, e.g. "gpt2-small", "llama2-70b", "resnet50".
// `opts` has batch/seq/image already defaulted and range-checked by zoo.cc.
Graph build_gpt2(std::string_view variant, const ModelOptions& opts);
Graph build_llama(std::string_view variant, const ModelOptions& opts);
// The full shape of a GPT-2 or Llama variant under the options' ModelShape
// (kv_heads = heads and ffn = 4h for GPT-2; Llama's positions 0: the
// caller's context).
ModelShape gpt2_shape(std::string_view variant, const ModelOptions& opts);
ModelShape llama_shape(std::string_view variant, const ModelOptions& opts);
Graph build_mixtral(std::string_view variant, const ModelOptions& opts);
Graph build_bert(std::string_view variant, const ModelOptions& opts);
Graph build_resnet(std::string_view variant, const ModelOptions& opts);
Graph build_vgg(std::string_view variant, const ModelOptions& opts);
Graph build_mobilenet_v2(std::string_view variant, const ModelOptions& opts);
Graph build_unet(std::string_view variant, const ModelOptions& opts);

}  // namespace memwall::models
