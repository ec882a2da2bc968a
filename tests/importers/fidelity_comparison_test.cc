// `memwall bench fidelity`'s comparison on a hand-made step, without
// torch: the peak against its target band, and kernel scratch per op
// type, instance by instance only where the counts agree. The real steps
// are tests/importers/fidelity_test.cc's.
#include "memwall/importers/fidelity.h"

#include <gtest/gtest.h>

namespace memwall::importers {
namespace {

// Three ops whose only memory is scratch: the eager peak is conv0's 100 B.
MeasuredStep scratch_only_step(uint64_t measured_peak) {
  MeasuredStep step;
  step.graph.ops = {Op{.id = 0, .name = "conv0", .type = "conv", .workspace = 100},
                    Op{.id = 1, .name = "conv1", .type = "conv", .workspace = 50},
                    Op{.id = 2, .name = "mm", .type = "matmul"}};
  step.measured_peak_bytes = measured_peak;
  step.op_scratch = {{"conv", 120}, {"conv", 40}, {"matmul", 0}, {"relu", 0}, {"add", 8}};
  return step;
}

TEST(FidelityComparison, PeakIsOnTargetWithinItsBand) {
  const FidelityCase exact = compare_fidelity("toy", scratch_only_step(100));
  EXPECT_EQ(exact.model, "toy");
  EXPECT_EQ(exact.predicted, 100u);
  EXPECT_EQ(exact.predicted_op, "conv0");
  EXPECT_DOUBLE_EQ(exact.ratio, 1.0);
  EXPECT_TRUE(exact.on_target);
  // 1% below the measurement is past the 0.5% allowed below; 1% above is
  // just past the 1% allowed above.
  EXPECT_FALSE(compare_fidelity("toy", scratch_only_step(101)).on_target);
  EXPECT_FALSE(compare_fidelity("toy", scratch_only_step(99)).on_target);
}

TEST(FidelityComparison, ScratchIsComparedOneByOneOnlyWhereCountsAgree) {
  const std::vector<ScratchComparison> rows =
      compare_scratch(scratch_only_step(100).graph, scratch_only_step(100));
  ASSERT_EQ(rows.size(), 2u);  // matmul and relu have no scratch on either side
  const ScratchComparison& add = rows[0];
  EXPECT_EQ(add.type, "add");
  EXPECT_FALSE(add.aligned());
  EXPECT_EQ(add.measured_max, 8u);
  EXPECT_EQ(add.under + add.over, 0u);
  const ScratchComparison& conv = rows[1];
  EXPECT_EQ(conv.type, "conv");
  EXPECT_TRUE(conv.aligned());
  EXPECT_EQ(conv.measured_max, 120u);
  EXPECT_EQ(conv.predicted_max, 100u);
  EXPECT_EQ(conv.under, 1u);
  EXPECT_EQ(conv.worst_under, 20u);
  EXPECT_EQ(conv.over, 1u);
  EXPECT_EQ(conv.worst_over, 10u);
}

}  // namespace
}  // namespace memwall::importers
