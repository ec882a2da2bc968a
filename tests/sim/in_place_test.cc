// In-place steps (Note [In-place steps] in src/plan/in_place.cc) on a
// hand-built graph whose figures are worked out in the comments.
#include <gtest/gtest.h>

#include <string>

#include "../graph/graph_builder.h"
#include "memwall/graph/versions.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "sim_test_util.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// x (input, 16 B) -> op 0 conv -> a (64 B) -> op 1 relu_ -> a@v1 (64 B,
// the next version of a) -> op 2, the backward, reads a@v1. Op 1 also
// updates the running statistic rm (optim_state, 4 B), as batch norm does.
struct Chain {
  Graph graph;
  BufferId rm, x, a, a1;
};
Chain chain() {
  GraphBuilder g;
  Chain c;
  c.rm = g.buffer("rm", 4, BufferKind::kOptimState);
  c.x = g.buffer("x", 16, BufferKind::kInput);
  c.a = g.buffer("a", 64, BufferKind::kActivation);
  c.a1 = g.buffer("a@v1", 64, BufferKind::kActivation);
  g.graph.buffers[c.a1].version_of = c.a;
  g.op("conv", Phase::kForward, {c.x}, {c.a});
  g.op("relu_", Phase::kForward, {c.a}, {c.a1}, {c.rm});
  g.op("bwd", Phase::kBackward, {c.a1}, {});
  set_times(g.graph, {0.5, 0.25, 0.5});
  validate(g.graph);
  c.graph = g.graph;
  return c;
}

SimResult run(const Graph& graph, const Plan& plan) {
  return simulate(graph, plan, test_hardware());
}

TEST(InPlaceSteps, AVersionTakesOverTheStorageOfOneThatDiesThere) {
  const Chain c = chain();
  // Default plan: rm 4 + x 16 + a 64 = 84 during op 0; x is freed after its
  // reader (t = 0.5); op 1 releases a as it starts and puts a@v1 in its
  // place: 68. Out of place, op 1 holds a and a@v1: 4 + 128 = 132.
  const Plan plan = default_plan(c.graph, "test", 1 << 20);
  const SimResult in_place = run(c.graph, plan);
  ASSERT_TRUE(in_place.valid) << in_place.reason;
  EXPECT_EQ(device_peak(in_place), 84u);
  const SimResult rewritten = run(out_of_place(c.graph), plan);
  ASSERT_TRUE(rewritten.valid) << rewritten.reason;
  EXPECT_EQ(device_peak(rewritten), 132u);
  // Time is the same either way: 0.5 + 0.25 + 0.5.
  EXPECT_EQ(in_place.iteration_time, 1.25);
  EXPECT_EQ(rewritten.iteration_time, 1.25);
  // The memory plan agrees with the default schedule's accounting.
  EXPECT_EQ(memory_profile(c.graph).peak_bytes, 84u);
}

TEST(InPlaceSteps, AVersionReadAgainLaterMakesTheStepRunOutOfPlace) {
  const Chain c = chain();
  // a@v1 is dropped after op 1 and recomputed from a, which the plan keeps:
  // the first run of op 1 is out of place (a is read again by the
  // recompute): rm + a + a@v1 = 132 (x already freed). The recompute is the
  // last reader of a, so it runs in place; the free of a that follows is
  // then a no-op.
  const Plan plan =
      make_plan({Step::compute(0), Step::free(c.x), Step::compute(1), Step::free(c.a1),
                 Step::recompute(1), Step::compute(2), Step::free(c.a), Step::free(c.a1)});
  const SimResult r = run(c.graph, plan);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(device_peak(r), 132u);
  // 0.5 + 0.25 + 0.25 (the recompute) + 0.5.
  EXPECT_EQ(r.iteration_time, 1.5);
  EXPECT_EQ(r.curves[0].back().bytes, 4u);  // only rm is left
}

TEST(InPlaceSteps, ASwapOutOfThePreviousVersionAfterwardsKeepsItsStorage) {
  const Chain c = chain();
  const Plan plan =
      make_plan({Step::compute(0), Step::free(c.x), Step::compute(1), Step::swap_out(c.a),
                 Step::compute(2), Step::free(c.a1), Step::free(c.a)});
  const SimResult r = run(c.graph, plan);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(device_peak(r), 132u);
}

// The new version's stay continues its predecessor's (Residency::continues),
// which a layout keeps at one address.
TEST(InPlaceSteps, TheNextVersionsStayContinuesThePreviousOnes) {
  const Chain c = chain();
  const SimResult r = simulate(c.graph, default_plan(c.graph, "test", 1 << 20), test_hardware(),
                               {.record_residency = true});
  ASSERT_TRUE(r.valid) << r.reason;
  int64_t of_a = -1;
  int64_t continued = -2;
  for (size_t i = 0; i < r.residencies.size(); ++i) {
    if (r.residencies[i].buf == c.a) of_a = static_cast<int64_t>(i);
    if (r.residencies[i].buf == c.a1) continued = r.residencies[i].continues;
  }
  ASSERT_GE(of_a, 0);
  EXPECT_EQ(continued, of_a);
  EXPECT_EQ(r.residencies[static_cast<size_t>(of_a)].continues, -1);
}

TEST(InPlaceSteps, TheNextVersionMayTakeThePreviousOnesAddress) {
  const Chain c = chain();
  Plan plan = default_plan(c.graph, "test", 1 << 20);
  plan.offsets = {{c.rm, 80}, {c.x, 64}, {c.a, 0}, {c.a1, 0}};
  const SimResult in_place = run(c.graph, plan);
  EXPECT_TRUE(in_place.valid) << in_place.reason;
  // Out of place the two versions are allocated at once and overlap.
  const SimResult rewritten = run(out_of_place(c.graph), plan);
  ASSERT_FALSE(rewritten.valid);
  EXPECT_NE(rewritten.reason.find("buffer 3 (\"a@v1\") at offset 0 overlaps buffer 2 (\"a\")"),
            std::string::npos)
      << rewritten.reason;
}

TEST(InPlaceSteps, AReplayLeavesPersistentStateAloneAndAnAccumulationCannotBeReplayed) {
  Chain c = chain();
  // rm lives on the host: the first run of op 1 needs it on the device...
  Plan plan = make_plan({Step::compute(0), Step::free(c.x), Step::compute(1), Step::free(c.a1),
                         Step::recompute(1), Step::compute(2), Step::free(c.a), Step::free(c.a1)});
  plan.placement = {{c.rm, Tier::kHost}};
  SimResult r = run(c.graph, plan);
  ASSERT_FALSE(r.valid);
  EXPECT_EQ(r.failed_step, 2u);
  // ... its replay does not: swap rm in for the first run and out again.
  plan.steps.insert(plan.steps.begin() + 2, Step::swap_in(c.rm));
  plan.steps.insert(plan.steps.begin() + 4, Step::swap_out(c.rm, Tier::kHost));
  r = run(c.graph, plan);
  EXPECT_TRUE(r.valid) << r.reason;
  // Updating an activation's gradient is not replayable.
  GraphBuilder g;
  const BufferId grad = g.buffer("g", 8, BufferKind::kTemp);
  const BufferId w_grad = g.buffer("w.grad", 8, BufferKind::kGrad);
  g.op("make", Phase::kBackward, {}, {grad, w_grad});
  g.op("acc", Phase::kBackward, {grad}, {}, {w_grad});
  r = run(g.graph, make_plan({Step::compute(0), Step::compute(1), Step::recompute(1)}));
  ASSERT_FALSE(r.valid);
  EXPECT_EQ(r.reason,
            "step 2 (recompute): op 1 (\"acc\") updates buffer 1 (\"w.grad\") in place and cannot "
            "be recomputed");
}

}  // namespace
}  // namespace memwall
