// `memwall trace --kernels`: whose kernels a meta-device trace stands for
// (issue 20: CPU dropout saves a mask of the input's dtype, CUDA one byte
// per element). tests/python/dropout_mlp.py: Linear(64, 64), ReLU, dropout
// 0.5, Linear(64, 10), batch 8, so dropout's mask has 8 * 64 = 512 elements.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "memwall/graph/graph.h"
#include "test_util.h"
#include "torch_env.h"

namespace memwall {
namespace {

using importers::TorchTraceRequest;
using importers::trace_torch;

// The last version of the buffer the forward op of `type` creates last:
// dropout's mask (on the CPU, bernoulli_ then div_ update it in place).
const Buffer* mask_of(const Graph& g, std::string_view type) {
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kForward || op.type != type || op.out.empty()) continue;
    BufferId b = op.out.back();
    for (bool newer = true; newer;) {
      newer = false;
      for (const Buffer& v : g.buffers) {
        if (v.version_of == b) {
          b = v.id;
          newer = true;
        }
      }
    }
    return &g.buffers[b];
  }
  return nullptr;
}

TEST(TraceKernels, DropoutSavesAByteMaskOnCudaAndOneOfTheInputsDtypeOnTheCpu) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  MEMWALL_REQUIRE_TORCH();
  const std::string script = testing::test_script("dropout_mlp.py:build");
  const Graph cuda = trace_torch({.script = script});
  const Graph cpu = trace_torch({.script = script, .kernels = "cpu"});
  EXPECT_EQ(cuda.meta.at("kernels"), "cuda");
  EXPECT_EQ(cpu.meta.at("kernels"), "cpu");
  // CUDA: native_dropout keeps a bool mask (512 B); the CPU: bernoulli_
  // and div_ fill an fp32 tensor in place (versions of empty_like's), which
  // mul's backward keeps (2,048 B).
  const Buffer* byte_mask = mask_of(cuda, "native_dropout");
  ASSERT_NE(byte_mask, nullptr);
  EXPECT_EQ(byte_mask->dtype, DType::kBool);
  EXPECT_EQ(byte_mask->bytes, 512u);
  EXPECT_TRUE(saved_for_backward(cuda)[byte_mask->id]);
  const Buffer* float_mask = mask_of(cpu, "bernoulli_");
  ASSERT_NE(float_mask, nullptr);
  EXPECT_EQ(float_mask->dtype, DType::kF32);
  EXPECT_EQ(float_mask->bytes, 2048u);
  EXPECT_NE(float_mask->version_of, kNoBuffer);
  EXPECT_TRUE(saved_for_backward(cpu)[float_mask->id]);
  EXPECT_EQ(mask_of(cpu, "native_dropout"), nullptr);
  EXPECT_EQ(memory_summary(cpu).saved_activation_bytes,
            memory_summary(cuda).saved_activation_bytes + 2048 - 512);
}

TEST(TraceKernels, BadChoicesAreOneLine) {
  const std::string script = testing::test_script("dropout_mlp.py:build");
  EXPECT_EQ(testing::trace_error({.script = script, .kernels = "gpu"}),
            "trace: unknown kernels 'gpu' (cuda or cpu)");
  EXPECT_EQ(testing::trace_error({.script = script, .measure = true, .kernels = "cuda"}),
            "trace: --measure runs the CPU's kernels; --kernels cuda needs the meta-device trace");
}

}  // namespace
}  // namespace memwall
