// in_place_steps (in_place.h, Note [In-place steps] in src/plan/in_place.cc)
// on a graph with one versioned buffer.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../graph/graph_builder.h"
#include "memwall/plan/in_place.h"

namespace memwall {
namespace {

// x (input) -> op 0 conv -> a -> op 1 relu_ -> a@v1 (the next version of
// a) -> op 2 bwd reads a@v1 and, when bwd_reads_a, a as well.
Graph versioned(bool bwd_reads_a) {
  testing::GraphBuilder g;
  const BufferId x = g.buffer("x", 16, BufferKind::kInput);
  const BufferId a = g.buffer("a", 64, BufferKind::kActivation);
  const BufferId a1 = g.buffer("a@v1", 64, BufferKind::kActivation);
  g.graph.buffers[a1].version_of = a;
  g.op("conv", Phase::kForward, {x}, {a});
  g.op("relu_", Phase::kForward, {a}, {a1});
  if (bwd_reads_a) {
    g.op("bwd", Phase::kBackward, {a1, a}, {});
  } else {
    g.op("bwd", Phase::kBackward, {a1}, {});
  }
  validate(g.graph);
  return g.graph;
}

Plan plan_of(std::vector<Step> steps) {
  Plan plan;
  plan.graph = "versioned";
  plan.hardware = "test";
  plan.budget = 1 << 20;
  plan.steps = std::move(steps);
  return plan;
}

using V = std::vector<uint8_t>;

TEST(PlanInPlaceSteps, TheStepCreatingANextVersionRunsInPlaceWhenThePreviousIsNotReadAgain) {
  const Graph graph = versioned(false);
  const Plan plan = plan_of({Step::compute(0), Step::free(0), Step::compute(1), Step::free(1),
                             Step::compute(2), Step::free(2)});
  validate_plan(plan, graph);
  EXPECT_EQ(in_place_steps(graph, plan), (V{0, 0, 1, 0, 0, 0}));
}

TEST(PlanInPlaceSteps, AStepReadingThePreviousVersionLaterKeepsItOutOfPlace) {
  const Graph graph = versioned(true);
  const Plan plan = plan_of({Step::compute(0), Step::free(0), Step::compute(1), Step::compute(2),
                             Step::free(1), Step::free(2)});
  validate_plan(plan, graph);
  EXPECT_EQ(in_place_steps(graph, plan), (V{0, 0, 0, 0, 0, 0}));
}

TEST(PlanInPlaceSteps, ASwapOutOfThePreviousVersionIsARead) {
  const Graph graph = versioned(false);
  // a is swapped out after relu_: its device copy is read again.
  const Plan out_of_place =
      plan_of({Step::compute(0), Step::compute(1), Step::swap_out(1), Step::compute(2)});
  EXPECT_EQ(in_place_steps(graph, out_of_place), (V{0, 0, 0, 0}));
  // Freed before anything reads it: in place again, and on the host never.
  const Plan freed = plan_of({Step::compute(0), Step::compute(1), Step::free(1), Step::compute(2)});
  EXPECT_EQ(in_place_steps(graph, freed), (V{0, 1, 0, 0}));
  const Plan on_host =
      plan_of({Step::compute(0), Step::compute(1, Tier::kHost), Step::free(1), Step::compute(2)});
  EXPECT_EQ(in_place_steps(graph, on_host), (V{0, 0, 0, 0}));
}

}  // namespace
}  // namespace memwall
