// The traced graph of a real PyTorch model against memwall's zoo graph of
// the same architecture and options (issue 8): the parameter counts agree
// exactly (and equal the published ones), the activation bytes saved for
// backward and the default schedule's peak within 5%. Both graphs go through
// the same accounting (memory_summary, memory_profile). docs/trace.md
// explains the remaining differences, and the test prints the table.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "test_util.h"
#include "torch_env.h"

namespace memwall {
namespace {

using importers::TorchTraceRequest;
using importers::trace_torch;

struct Case {
  const char* zoo;
  ModelOptions options;
  TorchTraceRequest request;
  // Published parameter counts: torchvision's model docs (num_params of the
  // IMAGENET1K_V1 weights) for the CNNs; Hugging Face's gpt2 (124,439,808,
  // tied head) for GPT-2 small.
  uint64_t published_params;
};

double relative(double traced, double zoo) { return std::abs(traced - zoo) / zoo; }

void cross_validate(const Case& c) {
  MEMWALL_REQUIRE_TORCH();
  const Graph traced = trace_torch(c.request);
  const Graph zoo = build_model(c.zoo, c.options);
  EXPECT_EQ(param_count(traced), c.published_params);
  EXPECT_EQ(param_count(zoo), c.published_params);
  const MemorySummary ts = memory_summary(traced);
  const MemorySummary zs = memory_summary(zoo);
  const MemoryProfile tp = memory_profile(traced);
  const MemoryProfile zp = memory_profile(zoo);
  const double saved = relative(static_cast<double>(ts.saved_activation_bytes),
                                static_cast<double>(zs.saved_activation_bytes));
  const double peak =
      relative(static_cast<double>(tp.peak_bytes), static_cast<double>(zp.peak_bytes));
  std::printf("%-12s params %llu / %llu | saved %llu / %llu (%.2f%%) | peak %llu / %llu (%.2f%%)\n",
              c.zoo, static_cast<unsigned long long>(param_count(traced)),
              static_cast<unsigned long long>(param_count(zoo)),
              static_cast<unsigned long long>(ts.saved_activation_bytes),
              static_cast<unsigned long long>(zs.saved_activation_bytes), 100 * saved,
              static_cast<unsigned long long>(tp.peak_bytes),
              static_cast<unsigned long long>(zp.peak_bytes), 100 * peak);
  EXPECT_LT(saved, 0.05) << c.zoo;
  EXPECT_LT(peak, 0.05) << c.zoo;
}

ModelOptions fp32_adam(int64_t batch, int64_t image, int64_t seq) {
  return {.batch = batch,
          .seq = seq,
          .image = image,
          .precision = Precision::kFp32,
          .optimizer = Optimizer::kAdam};
}

TorchTraceRequest torchvision(const char* name, int64_t batch) {
  return {.torchvision = name, .batch = batch, .image = 224, .optimizer = "adam"};
}

TEST(CrossValidation, ResNet50) {
  cross_validate({"resnet50", fp32_adam(32, 224, 0), torchvision("resnet50", 32), 25557032});
}

TEST(CrossValidation, Vgg16) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  cross_validate({"vgg16", fp32_adam(32, 224, 0), torchvision("vgg16", 32), 138357544});
}

TEST(CrossValidation, MobileNetV2) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  cross_validate({"mobilenetv2", fp32_adam(32, 224, 0), torchvision("mobilenet_v2", 32), 3504872});
}

// tests/python/gpt2_small.py builds batch 8, sequence 1024 (the zoo's
// defaults), fp32, Adam.
TEST(CrossValidation, Gpt2Small) {
  cross_validate({"gpt2-small",
                  fp32_adam(8, 0, 1024),
                  {.script = testing::test_script("gpt2_small.py:build")},
                  124439808});
}

}  // namespace
}  // namespace memwall
