// The layout problem of a graph's default schedule.
#include <gtest/gtest.h>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/layout/from_graph.h"
#include "memwall/layout/problem.h"
#include "memwall/models/zoo.h"
#include "zoo_models.h"

namespace memwall {
namespace {

TEST(FromGraph, DefaultScheduleLifetimes) {
  // two_layer_step (tests/graph/graph_builder.h), five ops:
  //   w param, w.m optim_state: live throughout            -> [0, 5)
  //   x input: from the start to its last reader, op 3      -> [0, 4)
  //   a1: op 0 to op 3; a2: op 1 to op 2; a1.grad: op 2 to 3 -> [0,4) [1,3) [2,4)
  //   w.grad: op 3, read by the optimizer: to the end      -> [3, 5)
  const Graph graph = testing::two_layer_step();
  const LayoutProblem p = layout_problem(graph);
  struct Want {
    int64_t id, lower, upper;
    uint64_t size;
  };
  const std::vector<Want> want = {{0, 0, 5, 100}, {1, 0, 4, 10}, {2, 0, 4, 20}, {3, 1, 3, 40},
                                  {4, 3, 5, 100}, {5, 2, 4, 30}, {6, 0, 5, 200}};
  ASSERT_EQ(p.buffers.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.buffers[i].id, want[i].id);
    EXPECT_EQ(p.buffers[i].lower, want[i].lower);
    EXPECT_EQ(p.buffers[i].upper, want[i].upper);
    EXPECT_EQ(p.buffers[i].size, want[i].size);
  }
  EXPECT_EQ(p.alignment, 1u);
  EXPECT_EQ(p.capacity, 0u);
  // Op 3 holds w x a1 w.grad a1.grad w.m = 460 bytes; the accounted peak
  // adds its 7 bytes of workspace.
  EXPECT_EQ(live_lower_bound(p), 460u);
  EXPECT_EQ(memory_profile(graph).peak_bytes, 467u);
}

TEST(FromGraph, SkipsEmptyBuffersAndHandlesNoOps) {
  testing::GraphBuilder g;
  g.buffer("w", 64, BufferKind::kParam);
  g.buffer("empty", 0, BufferKind::kInput);
  g.buffer("x", 8, BufferKind::kInput);
  const LayoutProblem no_ops = layout_problem(g.graph);
  ASSERT_EQ(no_ops.buffers.size(), 2u);
  EXPECT_EQ(no_ops.buffers[1].id, 2);
  EXPECT_EQ(no_ops.buffers[0].lower, 0);
  EXPECT_EQ(no_ops.buffers[0].upper, 1);
  EXPECT_EQ(live_lower_bound(no_ops), memory_profile(g.graph).peak_bytes);
  validate_problem(no_ops);
}

// The live lower bound is the accounted peak of the default schedule less the
// workspace of the op at the peak, on every zoo model.
TEST(FromGraph, LiveBoundIsThePeakWithoutWorkspace) {
  for (const ModelInfo& info : model_zoo()) {
    SCOPED_TRACE(info.name);
    const Graph graph = small_zoo_model(info);
    const LayoutProblem p = layout_problem(graph);
    validate_problem(p);
    const MemoryProfile profile = memory_profile(graph);
    ASSERT_NE(profile.peak_op, kNoOp);
    EXPECT_EQ(live_lower_bound(p), profile.peak_bytes - graph.ops[profile.peak_op].workspace);
  }
}

}  // namespace
}  // namespace memwall
