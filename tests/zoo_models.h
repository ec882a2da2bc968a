// The zoo in tests that sweep it (tests/ is on every test executable's
// include path): each model at small shapes, and its names as the
// parameters of a test suite.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"

namespace memwall {

// Small shapes: the properties a sweep checks do not depend on size, the
// run time does. Batch 1; a CNN's images 32 pixels wide (U-Net's 64), a
// sequence model's sequences 64 tokens long.
inline ModelOptions small_zoo_options(const ModelInfo& info) {
  ModelOptions options;
  options.batch = 1;
  if (info.family == ModelFamily::kCnn) {
    options.image = info.name == "unet" ? 64 : 32;
  } else {
    options.seq = 64;
  }
  return options;
}

// Llama at a small shape (4 layers, h 256, 8 query heads of 32 with 2
// key-value heads, SwiGLU width 512, vocabulary 1,000), bf16, with --flash:
// the model of the context-parallel and per-stage ZeRO tests.
inline ModelOptions small_llama_options(int64_t batch, int64_t seq) {
  ModelOptions o;
  o.batch = batch;
  o.seq = seq;
  o.flash = true;
  o.shape = {.layers = 4,
             .hidden = 256,
             .heads = 8,
             .kv_heads = 2,
             .ffn = 512,
             .vocab = 1000,
             .positions = 4096};
  return o;
}

inline Graph small_zoo_model(const ModelInfo& info) {
  return build_model(info.name, small_zoo_options(info));
}

// Every zoo model's name, for ::testing::ValuesIn.
inline std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  for (const ModelInfo& m : model_zoo()) names.push_back(m.name);
  return names;
}

// A zoo model's name as a test's name (gtest allows letters, digits and
// '_'): INSTANTIATE_TEST_SUITE_P's last argument.
inline std::string zoo_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace memwall
