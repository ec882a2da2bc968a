// Note [Non-contiguous placement]: the integer programme on hand-made
// segment costs, whose optimal placements and loads the comments work out
// by enumeration, and on the zoo's GPT-2 against the contiguous placement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_placement.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {
namespace {

// Segments of these seconds and resident bytes (nothing saved, no peaks),
// with these boundary seconds, on `devices` devices, one micro-batch in
// flight.
PlacementProblem placement_case(const std::vector<double>& seconds,
                                const std::vector<uint64_t>& states,
                                const std::vector<double>& boundaries, int devices,
                                uint64_t budget) {
  PlacementProblem p;
  for (size_t u = 0; u < seconds.size(); ++u) {
    p.segments.push_back({.seconds = seconds[u], .states = states[u]});
  }
  p.boundary_seconds = boundaries;
  p.devices = devices;
  p.budget = budget;
  return p;
}

std::string placement_error(const PlacementProblem& p) {
  try {
    solve_placement_ip(p, Deadline::in(10));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Segments of 2, 3 and 2 s, each boundary 0.25 s to each side, on 2 devices.
// Contiguous: {0 | 1 2} loads 2 + 0.25 and 5 + 0.25; {0 1 | 2} the same
// mirrored: best 5.25. Non-contiguous {0 2 | 1}: device 0 runs 4 s and
// pays both boundaries, 4.5; device 1 runs 3 s and pays both, 3.5: best
// 4.5, the only placement under 5.25 (the others are the two contiguous
// ones, device 0 holding segment 0 by symmetry).
TEST(PipelinePlacement, NonContiguousBeatsTheBestContiguousSplit) {
  const PlacementProblem p = placement_case({2, 3, 2}, {1, 1, 1}, {0.25, 0.25}, 2, 100);
  const PlacementResult r = solve_placement_ip(p, Deadline::in(10));
  EXPECT_EQ(r.device, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(r.loads, (std::vector<double>{4.5, 3.5}));
  EXPECT_EQ(r.max_load, 4.5);
  EXPECT_TRUE(r.optimal);
  EXPECT_EQ(r.bound, 4.5);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.contiguous_load, 5.25);
  EXPECT_EQ(r.contiguous_device.size(), 3u);
}

// Four 1 s segments, boundaries 0.5 s, on 2 devices: {0 1 | 2 3} loads
// 2 + 0.5 each. Any other placement splits two or more boundaries, and one
// device pays two of them on 2 s of work or runs 3 s: 3 or more. The
// programme agrees with the contiguous optimum.
TEST(PipelinePlacement, AContiguousOptimumIsFoundByBoth) {
  const PlacementProblem p = placement_case({1, 1, 1, 1}, {1, 1, 1, 1}, {0.5, 0.5, 0.5}, 2, 100);
  const PlacementResult r = solve_placement_ip(p, Deadline::in(10));
  EXPECT_EQ(r.device, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(r.max_load, 2.5);
  EXPECT_EQ(r.contiguous_load, 2.5);
  EXPECT_EQ(r.contiguous_device, r.device);
  EXPECT_TRUE(r.optimal);
}

// Resident bytes 4, 4, 1, 1 on 2 devices of 5 bytes: no contiguous split
// fits ({0 | 1 2 3} holds 6, {0 1 | 2 3} 8, {0 1 2 | 3} 9). The two that do
// pair a 4 with a 1: {0 2 | 1 3} splits all three boundaries, 0.25, 0.125
// and 0.25 s, each device paying all of them: 2 + 0.625; {0 3 | 1 2} splits
// the first and last, each device paying 0.5: 2.5, the optimum.
TEST(PipelinePlacement, MemoryCanAllowOnlyANonContiguousPlacement) {
  const PlacementProblem p = placement_case({1, 1, 1, 1}, {4, 4, 1, 1}, {0.25, 0.125, 0.25}, 2, 5);
  const PlacementResult r = solve_placement_ip(p, Deadline::in(10));
  EXPECT_EQ(r.device, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(r.max_load, 2.5);
  EXPECT_TRUE(placement_fits(p, r.device));
  EXPECT_TRUE(r.contiguous_device.empty());
  EXPECT_EQ(r.contiguous_load, std::numeric_limits<double>::infinity());
}

// Saved bytes count once per micro-batch in flight, the largest peak once:
// with saved 10 each, peaks 7, 0 and 3, two in flight, a pair of segments
// holds 2 x (1 + 2 x 10) = 42 and its larger peak: {0 2} and {0 1} 49,
// {1 2} 45; one segment at most 21 + 7. At 49 bytes {0 2 | 1} (4.5 s) fits;
// at 48 only {0 | 1 2} (5.25 s); at 44 none.
TEST(PipelinePlacement, SavedBytesCountPerMicroBatchAndTheLargestPeakOnce) {
  PlacementProblem p = placement_case({2, 3, 2}, {1, 1, 1}, {0.25, 0.25}, 2, 49);
  for (SegmentCost& s : p.segments) s.saved = 10;
  p.segments[0].peak = 7;
  p.segments[2].peak = 3;
  p.in_flight = 2;
  EXPECT_TRUE(placement_fits(p, {0, 1, 0}));
  EXPECT_EQ(solve_placement_ip(p, Deadline::in(10)).device, (std::vector<int>{0, 1, 0}));
  p.budget = 48;
  EXPECT_FALSE(placement_fits(p, {0, 1, 0}));
  const PlacementResult r = solve_placement_ip(p, Deadline::in(10));
  EXPECT_EQ(r.device, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(r.max_load, 5.25);
  EXPECT_EQ(r.contiguous_load, 5.25);
  p.budget = 44;
  EXPECT_EQ(placement_error(p),
            "pipeline: no placement of the 3 segments on 2 devices fits 44 bytes a device, 2 "
            "micro-batch(es) in flight a segment (CBC proved it)");
}

TEST(PipelinePlacement, BudgetsNoPlacementFitsAreOneClearError) {
  // 3 + 3 + 3 resident bytes on 2 devices of 4: each fits alone, no pair does.
  EXPECT_EQ(placement_error(placement_case({1, 1, 1}, {3, 3, 3}, {0, 0}, 2, 4)),
            "pipeline: no placement of the 3 segments on 2 devices fits 4 bytes a device, 1 "
            "micro-batch(es) in flight a segment (CBC proved it)");
  EXPECT_EQ(placement_error(placement_case({1, 1}, {3, 9}, {0}, 2, 4)),
            "pipeline: segment 1 alone needs 9 bytes with 1 micro-batches in flight, over the "
            "budget of 4 bytes a device");
  EXPECT_EQ(placement_error(placement_case({1, 1}, {1, 1}, {0}, 3, 4)),
            "pipeline: 2 segments cannot fill 3 devices: every device needs at least one");
  EXPECT_EQ(placement_error(placement_case({1, 1}, {1, 1}, {}, 2, 4)),
            "pipeline: 0 boundary times for 2 segments: give one fewer than the segments");
}

// GPT-2 small's layers on 4 devices: the programme is never worse than the
// best contiguous placement under its own model, and the plan simulates the
// placement it chose.
TEST(PipelinePlacement, GptTwoPlacementIsNoWorseThanContiguousAndSimulates) {
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware hw = find_gpu("a100-80g");
  const PlacementPlan out =
      plan_placement(graph, hw, {.devices = 4, .micro_batches = 8}, Deadline::in(20));
  const PlacementResult& r = out.placement;
  ASSERT_EQ(r.device.size(), out.cut_points.size());
  EXPECT_EQ(r.device[0], 0);
  EXPECT_LE(r.max_load, r.contiguous_load);
  EXPECT_LE(r.bound, r.max_load);
  ASSERT_EQ(out.chunk_devices.size(), out.plan.costs.size());
  for (size_t k = 1; k < out.chunk_devices.size(); ++k) {
    EXPECT_NE(out.chunk_devices[k], out.chunk_devices[k - 1]);  // runs merged
  }
  for (const PipelineTask& t : out.plan.sim.tasks) EXPECT_EQ(t.device, out.chunk_devices[t.chunk]);
  EXPECT_EQ(out.plan.sim.devices.size(), 4u);
  EXPECT_GT(out.plan.sim.step_time, 0);
  EXPECT_THROW(plan_placement(graph, hw, {.devices = 4, .chunks_per_device = 2, .micro_batches = 8},
                              Deadline::in(20)),
               Error);
  EXPECT_THROW(
      plan_placement(graph, hw,
                     {.devices = 4, .micro_batches = 8, .schedule = PipelineSchedule::kInterleaved},
                     Deadline::in(20)),
      Error);
}

}  // namespace
}  // namespace memwall
