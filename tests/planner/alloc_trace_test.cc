// Allocation traces (alloc_trace.h): a graph's default schedule, a
// lifetimes CSV and a plan's stays replayed through the allocator's
// policies. `memwall alloc-replay` and `memwall bench alloc` end to end are
// tests/cli/alloc_replay_test.cc.
#include "memwall/planner/alloc_trace.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/planner/plan_layout.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"

namespace memwall {
namespace {

// A device no replay here fills. Not larger: expandable segments reserve
// address ranges of the device's size.
constexpr uint64_t kHuge = uint64_t{64} << 30;

// The most bytes requested at once in a replay of the default schedule is
// the default schedule's peak, exactly: the trace has every buffer and every
// op's workspace, and frees come before allocations at equal times.
TEST(AllocTrace, DefaultScheduleReplaysToTheGraphsPeak) {
  for (const char* model : {"gpt2-small", "resnet50", "mobilenetv2"}) {
    const Graph graph = build_model(model, {});
    const AllocTrace trace = graph_alloc_trace(graph);
    const uint64_t peak = memory_profile(graph).peak_bytes;
    EXPECT_EQ(peak_live_bytes(trace), peak) << model;
    for (const char* policy : {"caching", "expandable", "stitching"}) {
      const PolicyReplay r = replay_policy(trace, policy, kHuge);
      ASSERT_TRUE(r.result.fits) << model << " " << policy;
      EXPECT_EQ(r.result.stats.peak_requested_bytes, peak) << model << " " << policy;
      EXPECT_GE(r.result.stats.peak_reserved_bytes, peak) << model << " " << policy;
    }
  }
}

TEST(AllocTrace, EventsFreeBeforeTheyAllocateAtTheSameTime) {
  const LayoutCsv csv = layout_from_csv("id,lower,upper,size\n7,0,2,100\n8,2,3,50\n9,1,3,10\n");
  const AllocTrace trace = csv_alloc_trace(csv, "tiny");
  const std::vector<alloc::ReplayEvent> events = replay_events(trace);
  using K = alloc::ReplayEvent::Kind;
  // Allocations are numbered in input order: 7 -> 0, 8 -> 1, 9 -> 2.
  const std::vector<std::pair<K, uint64_t>> expected = {{K::alloc, 0}, {K::alloc, 2}, {K::free, 0},
                                                        {K::alloc, 1}, {K::free, 1},  {K::free, 2}};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, expected[i].first) << i;
    EXPECT_EQ(events[i].id, expected[i].second) << i;
  }
  EXPECT_EQ(events[1].bytes, 10u);
  EXPECT_EQ(peak_live_bytes(trace), 110u);
}

// A CSV's own offsets are the plan policy's layout, which then reserves
// exactly the arena (rounded to a chunk).
TEST(AllocTrace, PlanPolicyUsesTheCsvsOffsets) {
  const LayoutCsv csv =
      layout_from_csv("id,lower,upper,size,offset\n1,0,2,4096,0\n2,1,3,4096,4096\n3,3,5,8192,0\n");
  AllocTrace trace = csv_alloc_trace(csv, "offsets");
  ASSERT_TRUE(trace.layout.has_value());
  EXPECT_EQ(trace.layout->arena, 8192u);
  const PolicyReplay r = replay_policy(trace, "plan", kHuge, {}, 4096);
  ASSERT_TRUE(r.result.fits);
  EXPECT_EQ(r.result.stats.peak_reserved_bytes, 8192u);
}

// A plan's stays: every swap-in or recompute is an allocation of its own,
// and the plan policy keeps one address per buffer, from memwall's layout.
TEST(AllocTrace, RematPlanReplaysThroughEveryPolicy) {
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const Hardware hw = find_gpu("a100-80g");
  const SimResult keep_all =
      simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw, {.record_curves = false});
  const uint64_t budget = device_peak(keep_all) * 95 / 100;
  const RematResult remat = plan_memwall(graph, hw, budget, {});
  const SimResult sim =
      simulate(graph, remat.plan, hw, {.record_curves = false, .record_residency = true});
  ASSERT_TRUE(sim.valid);
  AllocTrace trace = plan_alloc_trace(graph, remat.plan, sim);
  EXPECT_GT(trace.allocations.size(), trace.layout_problem.buffers.size());  // recomputes
  // Residencies leave workspace out: at most the simulator's peak.
  EXPECT_LE(peak_live_bytes(trace), device_peak(sim));
  add_layout(trace, 1.0);
  for (const std::string_view policy : alloc::policy_names()) {
    const PolicyReplay r = replay_policy(trace, policy, kHuge);
    EXPECT_TRUE(r.result.fits) << policy;
    EXPECT_EQ(r.result.stats.peak_requested_bytes, peak_live_bytes(trace)) << policy;
  }
}

}  // namespace
}  // namespace memwall
