// A run beside its prediction (memwall/report/run_comparison.h): the
// prediction's figures from a simulation, and the run's last iteration as
// a timeline in the simulator's layout.
#include <gtest/gtest.h>

#include "memwall/report/run_comparison.h"

namespace memwall {
namespace {

TEST(RunComparison, ThePredictionsOverlapIsTheCopiesTimeNotStalled) {
  SimResult sim;
  sim.iteration_time = 2.0;
  sim.peak_bytes[0] = 100;
  sim.peak_bytes[1] = 20;
  sim.peak_bytes[2] = 7;
  sim.bytes_moved[static_cast<size_t>(Resource::kH2D)] = 64;
  sim.timeline = {{Resource::kCompute, 0, 0.0, 2.0},
                  {Resource::kH2D, 1, 0.0, 1.0},
                  {Resource::kNvmeWrite, 2, 1.0, 4.0}};
  sim.transfer_stall_time = 1.0;  // of 4 s of copies
  const RunPrediction p = run_prediction(sim);
  EXPECT_EQ(p.time, 2.0);
  EXPECT_EQ(p.device, 100u);
  EXPECT_EQ(p.host, 20u);
  EXPECT_EQ(p.nvme, 7u);
  EXPECT_EQ(p.moved(Resource::kH2D), 64u);
  EXPECT_DOUBLE_EQ(p.overlap, 0.75);
  EXPECT_FALSE(p.time_with_run_kernels);
  EXPECT_EQ(run_prediction(SimResult()).overlap, 0.0);  // no copies
}

TEST(RunComparison, TheMeasuredTimelineIsTheLastIterationsSpansAndMemory) {
  MeasuredRun run;
  run.steps.push_back({.step_time_s = 5.0});
  run.steps.push_back({.step_time_s = 3.0});
  run.events = {{.lane = 1, .step = 4, .start_s = 0.5, .end_s = 2.5}};
  run.memory = {{.time_s = 1.0, .device_bytes = 10, .host_bytes = 3},
                {.time_s = 2.0, .device_bytes = 30, .host_bytes = 1}};
  Plan plan;
  plan.budget = 1000;
  const SimResult t = measured_timeline(run, plan);
  EXPECT_TRUE(t.valid);
  EXPECT_EQ(t.budget, 1000u);
  ASSERT_EQ(t.timeline.size(), 1u);
  EXPECT_EQ(t.timeline[0].resource, Resource::kH2D);
  EXPECT_EQ(t.timeline[0].step, 4u);
  EXPECT_EQ(t.iteration_time, 3.0);  // the last step's, not the last span's end
  EXPECT_EQ(t.peak_bytes[0], 30u);
  EXPECT_EQ(t.peak_bytes[1], 3u);
  EXPECT_EQ(t.curves[0].size(), 2u);
}

TEST(RunComparison, MeasuredOpsAreThoseWithATime) {
  Graph g;
  g.ops.resize(3);
  g.ops[1].time = 0.5;
  EXPECT_EQ(measured_ops(g), 1u);
}

}  // namespace
}  // namespace memwall
