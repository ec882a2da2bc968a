// Note [Copy contention]: on the emulated device copies and kernels slow
// each other down. Hand-built graphs with powers-of-two times, so every
// figure is exact.
#include <gtest/gtest.h>

#include <numeric>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "sim_test_util.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// The emulated device (Note [The emulated device's thread]): copies issue
// when the kernel before them has ended. `stream` = a device whose host
// thread runs ahead of its compute stream, where a prefetch issued at a
// kernel's start stretches it; a profile may give any device a contention.
Hardware contended(double compute, double copy, bool stream = false) {
  Hardware hw = test_hardware();
  hw.device_is_host_cpu = !stream;
  hw.copy_contention = {compute, copy};
  return hw;
}

// The time split still adds up: compute busy time plus the waits.
void expect_split_adds_up(const SimResult& r) {
  EXPECT_EQ(r.iteration_time, std::accumulate(r.waiting.begin(), r.waiting.end(), r.compute_time));
}

// The figures a case pins: iteration, compute busy and stalled time.
void expect_times(const SimResult& r, double iteration, double compute, double stall) {
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, iteration);
  EXPECT_EQ(r.compute_time, compute);
  EXPECT_EQ(r.transfer_stall_time, stall);
  expect_split_adds_up(r);
}

TEST(CopyContention, ComputeAloneIsUnchanged) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);
  g.op("f0", Phase::kForward, {}, {a});
  g.op("bwd", Phase::kBackward, {a}, {});
  set_times(g.graph, {1, 2});
  const SimResult r = simulate(g.graph, default_plan(g.graph, "test", 1 << 20), contended(4, 4));
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 3.0);
  EXPECT_EQ(r.compute_time, 3.0);
}

// a (1024 B: 1 s each way alone) is swapped out after f0 and back for bwd,
// on a device with a stream of its own. Uncontended: d2h 1..2 and h2d 2..3
// under f1 (1..3), bwd 3..4.
// With {2, 2}: d2h 1..3; f1 does half its work per second until 3 (1 s of
// its 2), then the h2d that starts at 3 (issued at f1's start, a prefetch)
// runs 3..5 beside f1's last second of work, which now takes 2: f1 ends at
// 5, stretched after it was first timed to end at 4; bwd 5..6, no wait.
TEST(CopyContention, APrefetchStretchesTheKernelItWasIssuedBeside) {
  const SwapGraph g = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(g.a), Step::compute(1), Step::swap_in(g.a),
                 Step::compute(2), Step::free(g.a), Step::free(g.b)});
  const SimResult apart = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(apart.valid) << apart.reason;
  EXPECT_EQ(apart.iteration_time, 4.0);
  EXPECT_EQ(apart.transfer_stall_time, 0.0);

  const SimResult r =
      simulate(g.graph, plan, contended(2, 2, /*stream=*/true), {.record_timeline = true});
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 6.0);
  EXPECT_EQ(r.compute_time, 6.0);
  EXPECT_EQ(r.transfer_stall_time, 0.0);
  expect_split_adds_up(r);
  // The timeline shows f1 as it ran, stretched.
  ASSERT_EQ(r.timeline.size(), 5u);
  for (const Span& s : r.timeline) {
    if (s.resource == Resource::kCompute && s.step == 2) {
      EXPECT_EQ(s.start, 1.0);
      EXPECT_EQ(s.end, 5.0);
    }
    if (s.resource == Resource::kD2H || s.resource == Resource::kH2D) {
      EXPECT_EQ(s.end - s.start, 2.0);
    }
  }
}

// The same plan on the emulated device, whose thread runs f1 before it
// issues the prefetch. Uncontended: d2h 1..2 beside f1 (1..3), h2d 3..4,
// bwd 4..5 after a 1 s wait. With {2, 2}: d2h 1..3; f1 does 1 s of its
// work by 3 and ends at 4; h2d 4..6 beside nothing; bwd 6..7.
TEST(CopyContention, OnTheEmulatedDeviceAPrefetchIssuesAfterTheKernel) {
  const SwapGraph g = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(g.a), Step::compute(1), Step::swap_in(g.a),
                 Step::compute(2), Step::free(g.a), Step::free(g.b)});
  expect_times(simulate(g.graph, plan, contended(1, 1)), 5.0, 4.0, 1.0);
  expect_times(simulate(g.graph, plan, contended(2, 2)), 7.0, 5.0, 2.0);
}

// A copy longer than the compute beside it: the compute does 1/2 of its
// work per second while the copy (3 s alone, 4.5 s beside compute) runs.
// f1 (2 s of work) starts at 1 and ends at 5; the copy ends at 5.5.
TEST(CopyContention, AComputeUnderALongCopyRunsAtTheContendedRate) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 3072, BufferKind::kActivation);
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  set_times(g.graph, {1, 2});
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::free(a)});
  for (const bool stream : {false, true}) {  // the swap_out issues after f0 either way
    const SimResult r = simulate(g.graph, plan, contended(2, 1.5, stream));
    ASSERT_TRUE(r.valid) << r.reason;
    EXPECT_EQ(r.compute_time, 5.0);
    EXPECT_EQ(r.iteration_time, 5.5);
    expect_split_adds_up(r);
  }
}

// Two copies at once slow compute no more than one (a device with a
// stream of its own, where both prefetches run beside f1). f1 (4 s of work)
// starts at 1 beside a's d2h (2 s, 1..3) and w's h2d (1 s, 1..2, a
// prefetch issued at f1's start): 1 s of work by 3, so f1 would end at 6.
// a's h2d, also issued at f1's start, waits for a's host copy (3) and runs
// 3..5 beside f1: 1 more second of work by 5, the last alone: f1 ends at 7,
// bwd runs 7..8.
TEST(CopyContention, OverlappingCopiesSlowComputeOnce) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 2048, BufferKind::kActivation);  // 2 s each way
  const BufferId w = g.buffer("w", 1024, BufferKind::kParam);       // 1 s in
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  g.op("bwd", Phase::kBackward, {a, w}, {});
  set_times(g.graph, {1, 4, 1});
  Plan plan = make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::swap_in(w),
                         Step::swap_in(a), Step::compute(2), Step::free(a), Step::free(w)});
  plan.placement = {{w, Tier::kHost}};
  expect_times(simulate(g.graph, plan, contended(2, 1, /*stream=*/true)), 8.0, 8.0, 0.0);
  // On the emulated device both prefetches issue after f1: f1 1..6 (1 s of
  // work beside a's d2h 1..3), w 6..7, a 7..9, bwd 9..10 after 3 s of wait.
  expect_times(simulate(g.graph, plan, contended(2, 1)), 10.0, 7.0, 3.0);
}

}  // namespace
}  // namespace memwall
