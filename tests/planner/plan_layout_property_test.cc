// The property that ties src/layout to the simulator through the
// planner's layout of a plan (plan_layout.h): a layout of a plan's
// residencies, pinned as the plan's offsets, passes the simulator's overlap
// check, per buffer and per stay (Note [Offsets per stay]). `memwall layout`
// and `memwall bench layout` end to end are tests/cli/layout_test.cc.
#include "memwall/planner/plan_layout.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "memwall/hw/hardware.h"
#include "memwall/layout/default_layout.h"
#include "memwall/layout/problem.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"
#include "zoo_models.h"

namespace memwall {
namespace {

class PlanLayoutProperty : public ::testing::TestWithParam<std::string> {};

// About 30% of the activations swapped or recomputed over their largest gap.
Plan random_eviction_plan(const Graph& graph, const Hardware& hw, unsigned seed) {
  const BufferUses uses(graph);
  std::mt19937 rng(seed);
  std::vector<Eviction> evictions;
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::kActivation || !std::bernoulli_distribution(0.3)(rng)) continue;
    std::optional<Eviction> gap = largest_gap(uses, b.id);
    if (!gap) continue;
    const OpId producer = uses.producer(b.id);
    const bool recomputable = producer != kNoOp && graph.ops[producer].updates.empty();
    gap->how = recomputable && rng() % 2 ? Eviction::How::kRecompute : Eviction::How::kSwap;
    evictions.push_back(*gap);
  }
  return plan_with_evictions(graph, evictions, hw.name, uint64_t{1} << 60);
}

// Random swaps and recomputes; the default layout of the plan's residencies
// is accepted by the simulator, and the same layout with one buffer moved
// onto a co-resident one is rejected for that overlap.
TEST_P(PlanLayoutProperty, LayoutOfResidenciesPassesTheSimulator) {
  const Graph graph = small_zoo_model(find_model(GetParam()));
  const Hardware& hw = find_gpu("a100-80g");
  const Plan plan = random_eviction_plan(graph, hw, 42);
  const SimResult sim = simulate(graph, plan, hw, {.record_residency = true});
  ASSERT_TRUE(sim.valid) << sim.reason;
  const LayoutProblem problem = plan_layout_problem(graph, sim.residencies, plan.budget);
  const DefaultLayoutResult layout = solve_default_layout(problem, {.time_budget = 0.2});
  ASSERT_EQ(check_layout(problem, layout.layout), std::nullopt);
  // The hull of a buffer's stays covers its device peak: the arena is at
  // least the simulated peak without workspace, and usually close to it.
  EXPECT_GE(layout.layout.arena, live_lower_bound(problem));
  const Plan pinned = pin_offsets(plan, graph, problem, layout.layout, sim.residencies);
  const SimResult check = simulate(graph, pinned, hw);
  ASSERT_TRUE(check.valid) << check.reason;
  EXPECT_EQ(check.peak_bytes[0], sim.peak_bytes[0]);
  EXPECT_EQ(pinned_arena(pinned, graph), layout.layout.arena);

  // Move a buffer onto one it is co-resident with: the simulator objects.
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    for (size_t k = i + 1; k < problem.buffers.size(); ++k) {
      const LayoutBuffer &a = problem.buffers[i], &b = problem.buffers[k];
      if (a.lower >= b.upper || b.lower >= a.upper) continue;
      Plan corrupt = pinned;
      corrupt.offsets[static_cast<BufferId>(b.id)] = layout.layout.offsets[i];
      const SimResult bad = simulate(graph, corrupt, hw);
      ASSERT_FALSE(bad.valid);
      EXPECT_NE(bad.reason.find("overlaps"), std::string::npos) << bad.reason;
      return;
    }
  }
  FAIL() << "no two co-resident buffers";
}

// Note [Offsets per stay]: the same random plans laid out per stay, with
// their ops' workspace. The simulator accepts the pinned plan, and the
// arena is never above the one-offset-per-buffer layout's nor below the
// simulated peak (workspace included); a stay moved onto a co-resident one
// is rejected. Some workspaces have a span beyond their bytes (Note
// [Workspace span]): the layout gives them the span.
TEST_P(PlanLayoutProperty, LayoutOfStaysPassesTheSimulatorAndNeedsNoMore) {
  Graph graph = small_zoo_model(find_model(GetParam()));
  for (Op& op : graph.ops) {
    if (op.phase == Phase::kBackward && op.id % 3 == 0) {
      op.workspace = 4096;  // some scratch
      if (op.id % 2 == 0) op.workspace_span = 4096 + 8192;
    }
  }
  const Hardware& hw = find_gpu("a100-80g");
  const Plan plan = random_eviction_plan(graph, hw, 7);
  const SimResult sim = simulate(graph, plan, hw, {.record_residency = true});
  ASSERT_TRUE(sim.valid) << sim.reason;
  const StayLayoutProblem stays =
      stay_layout_problem(graph, plan, sim.residencies, sim.workspaces, plan.budget);
  ASSERT_EQ(stays.item_of_stay.size(), sim.residencies.size());
  const DefaultLayoutResult layout = solve_default_layout(stays.problem, {.time_budget = 0.2});
  ASSERT_EQ(check_layout(stays.problem, layout.layout), std::nullopt);
  EXPECT_GE(layout.layout.arena, sim.peak_bytes[0]);
  const LayoutProblem per_buffer = plan_layout_problem(graph, sim.residencies, plan.budget);
  EXPECT_LE(live_lower_bound(stays.problem), live_lower_bound(per_buffer) + 4096 + 8192);
  const Plan pinned = pin_stay_offsets(plan, stays, layout.layout, sim.residencies);
  EXPECT_FALSE(pinned.workspace_offsets.empty());
  const SimResult check = simulate(graph, pinned, hw);
  ASSERT_TRUE(check.valid) << check.reason;
  EXPECT_EQ(check.peak_bytes[0], sim.peak_bytes[0]);
  // Move the second stay of a buffer that moves onto an item co-resident
  // with it: the simulator objects.
  for (const auto& [buf, later] : pinned.stay_offsets) {
    int64_t item = -1;
    for (size_t r = 0, seen = 0; r < sim.residencies.size() && item < 0; ++r) {
      if (sim.residencies[r].buf == buf && seen++ == 1) item = stays.item_of_stay[r];
    }
    if (item < 0) continue;
    const LayoutBuffer& mine = stays.problem.buffers[static_cast<size_t>(item)];
    for (size_t i = 0; i < stays.problem.buffers.size(); ++i) {
      const LayoutBuffer& other = stays.problem.buffers[i];
      if (static_cast<int64_t>(i) == item || mine.lower >= other.upper ||
          other.lower >= mine.upper) {
        continue;
      }
      Plan corrupt = pinned;
      corrupt.stay_offsets[buf][0] = layout.layout.offsets[i];
      const SimResult bad = simulate(graph, corrupt, hw);
      ASSERT_FALSE(bad.valid);
      EXPECT_NE(bad.reason.find("overlaps"), std::string::npos) << bad.reason;
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, PlanLayoutProperty, ::testing::ValuesIn(zoo_model_names()),
                         zoo_test_name);

}  // namespace
}  // namespace memwall
