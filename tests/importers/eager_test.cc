// Note [Eager lifetimes]: traced graphs carry when eager PyTorch frees each
// storage. tests/python/linear_toy.py is issue 20's toy (two bias-free
// Linear(2000, 2000), batch 16, Adam with foreach=False), on which memwall's
// last-reader estimate was 10% below the measured peak.
#include <string>

#include <gtest/gtest.h>

#include "graph_lookup.h"
#include "memwall/graph/graph.h"
#include "torch_env.h"

namespace memwall {
namespace {

TEST(EagerLifetimes, AdamsPreviousDenomAndTheBatchAreAliveAtTheEagerPeak) {
  MEMWALL_REQUIRE_TORCH();
  const Graph g = importers::trace_torch({.script = testing::test_script("linear_toy.py:build")});
  ASSERT_TRUE(has_eager_lifetimes(g));
  // The training loop holds its batch (input and target, 16 x 2000 fp32,
  // 128,000 B each) to the end of the step.
  for (const char* name : {"input", "target"}) {
    const Buffer* b = find_buffer(g, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->eager_free, kNoOp) << name;
    EXPECT_EQ(b->bytes, 128'000u) << name;
  }
  // torch.optim.Adam's single-tensor loop: the first weight's denom (2000 x
  // 2000 fp32, 16,000,000 B) dies only when the loop rebinds the name to the
  // second weight's, after that one is allocated. memwall's own schedule
  // frees it after its last reader.
  const MemoryProfile own = memory_profile(g);
  const MemoryProfile eager = memory_profile(g, eager_liveness(g));
  EXPECT_EQ(eager.peak_bytes, own.peak_bytes + 16'000'000 + 2 * 128'000);
  EXPECT_EQ(g.ops[eager.peak_op].phase, Phase::kOptimizer);
  EXPECT_EQ(g.ops[own.peak_op].phase, Phase::kOptimizer);
}

}  // namespace
}  // namespace memwall
