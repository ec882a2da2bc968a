// Note [Eager kernels] (src/models/eager_kernels.cc): transformers'
// plain-torch LlamaRMSNorm and GPT-2's gelu_new save exactly these tensors
// more than the zoo's fused kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

uint64_t saved(const std::string& model, Precision precision, bool eager) {
  ModelOptions o{.batch = 2, .seq = 128, .precision = precision, .flash = true};
  o.eager_kernels = eager;
  const Graph g = build_model(model, o);
  validate(g);
  EXPECT_EQ(g.name.ends_with(" eager-kernels"), eager);
  return memory_summary(g).saved_activation_bytes;
}

TEST(EagerKernels, LlamaRmsNormSavesItsNormalizedInput) {
  const uint64_t rows = 2 * 128, h = 4096, norms = 2 * 32 + 1;
  // fp32: x^ beside x. 16-bit: an fp32 copy of x and a 16-bit x^ instead
  // of x, 4 + 2 - 2 bytes per element.
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    EXPECT_EQ(saved("llama2-7b", p, true) - saved("llama2-7b", p, false), norms * rows * h * 4);
  }
}

TEST(EagerKernels, Gpt2GeluNewSavesThreeMoreTensors) {
  const uint64_t rows = 2 * 128, inner = 3072, layers = 12;
  EXPECT_EQ(
      saved("gpt2-small", Precision::kBf16, true) - saved("gpt2-small", Precision::kBf16, false),
      3 * layers * rows * inner * 2);
}

TEST(EagerKernels, OnlyForTransformers) {
  ModelOptions o{.batch = 2};
  o.eager_kernels = true;
  EXPECT_THROW(build_model("resnet50", o), Error);
}

}  // namespace
}  // namespace memwall
