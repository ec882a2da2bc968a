// Properties every zoo model must have, whatever its architecture.
#include <gtest/gtest.h>

#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "zoo_models.h"

namespace memwall {
namespace {

// Small shapes keep the suite fast; parameter counts do not depend on them.
ModelOptions small(const ModelInfo& m) {
  ModelOptions o;
  o.batch = 1;
  if (m.family == ModelFamily::kCnn) {
    o.image = 64;
  } else {
    o.seq = 64;
  }
  return o;
}

class ZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooModel, BuildsAValidGraphWithThePublishedParameterCount) {
  const ModelInfo& m = find_model(GetParam());
  Graph g = build_model(m.name, small(m));
  EXPECT_NO_THROW(validate(g));
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(m.param_count));
  EXPECT_EQ(g.meta["param_count"], m.param_count);
  EXPECT_EQ(g.meta["model"], m.name);

  // A whole iteration: forward, backward and optimizer phases, in that order.
  int last_phase = 0;
  bool seen[3] = {false, false, false};
  for (const Op& op : g.ops) {
    int phase = static_cast<int>(op.phase);
    ASSERT_LE(phase, 2) << op.name;
    EXPECT_GE(phase, last_phase) << "phases out of order at " << op.name;
    last_phase = phase;
    seen[phase] = true;
  }
  EXPECT_TRUE(seen[0] && seen[1] && seen[2]);

  // Every parameter gets a gradient and exactly one optimizer step.
  const MemorySummary s = memory_summary(g);
  const uint64_t param_bytes = s.bytes_by_kind[static_cast<int>(BufferKind::kParam)];
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kGrad)], param_bytes);
  // bf16 Adam: fp32 master, exp_avg, exp_avg_sq = 12 bytes per parameter (ZeRO sec. 3.1).
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 6 * param_bytes);
  EXPECT_GT(s.saved_activation_bytes, 0u);

  const MemoryProfile p = memory_profile(g);
  EXPECT_GT(p.peak_bytes, 16ull * param_count(g) - 1);
  EXPECT_EQ(p.initial_bytes, param_bytes +
                                 s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)] +
                                 s.bytes_by_kind[static_cast<int>(BufferKind::kInput)]);
}

TEST_P(ZooModel, Fp32SgdHasNoOptimizerState) {
  const ModelInfo& m = find_model(GetParam());
  ModelOptions o = small(m);
  o.precision = Precision::kFp32;
  o.optimizer = Optimizer::kSgd;
  Graph g = build_model(m.name, o);
  const MemorySummary s = memory_summary(g);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kParam)], 4 * param_count(g));
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 0u);
}

// The forward pass alone: the training iteration's forward ops, the same
// ones in the same order, and nothing else (no grads, no optimizer states).
TEST_P(ZooModel, ForwardOnlyIsTheIterationsForwardOps) {
  const ModelInfo& m = find_model(GetParam());
  ModelOptions o = small(m);
  const Graph train = build_model(m.name, o);
  o.forward_only = true;
  const Graph g = build_model(m.name, o);
  EXPECT_NO_THROW(validate(g));
  EXPECT_FALSE(has_backward(g));
  EXPECT_EQ(g.name, train.name + " forward-only");
  EXPECT_EQ(g.meta["forward_only"], true);
  EXPECT_FALSE(g.meta.contains("optimizer"));
  size_t forward = 0;
  for (const Op& op : train.ops) forward += op.phase == Phase::kForward;
  ASSERT_EQ(g.ops.size(), forward);
  for (const Op& op : g.ops) {
    EXPECT_EQ(op.phase, Phase::kForward) << op.name;
    EXPECT_EQ(op.name, train.ops[op.id].name);
  }
  const MemorySummary s = memory_summary(g);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kGrad)], 0u);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 0u);
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(m.param_count));
}

INSTANTIATE_TEST_SUITE_P(All, ZooModel, ::testing::ValuesIn(zoo_model_names()), zoo_test_name);

TEST(Zoo, RejectsBadOptions) {
  ModelOptions o;
  o.batch = -1;
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  o.batch = 1;
  o.seq = 1025;  // GPT-2's learned positions stop at 1024
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  o.seq = 0;
  o.image = 224;
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  EXPECT_THROW(build_model("no-such-model", {}), Error);
  EXPECT_THROW(parse_precision("fp8"), Error);
  EXPECT_THROW(parse_optimizer("lion"), Error);
}

TEST(Zoo, HugeShapesOverflowCleanly) {
  // 2^24 images of 65536^2 pixels: single tensors reach 2^61 bytes and their
  // sum passes 2^62; the sizes are checked, never wrapped.
  ModelOptions o;
  o.batch = int64_t{1} << 24;
  o.image = 65536;
  EXPECT_THROW(
      {
        Graph g = build_model("unet", o);
        validate(g);
        memory_profile(g);
      },
      Error);
}

}  // namespace
}  // namespace memwall
