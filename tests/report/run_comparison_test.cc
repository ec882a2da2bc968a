// A run beside its prediction (memwall/report/run_comparison.h): the
// prediction's figures from a simulation, and the run's last iteration as
// a timeline in the simulator's layout.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// `memwall run`'s JSON and table: each step's figures beside the
// prediction, eager's verdict, the step predicted with the run's kernels.
TEST(RunComparison, TheJsonAndTheTableSetTheRunBesideThePrediction) {
  Graph g;
  g.name = "g";
  g.ops.resize(2);
  g.ops[0].time = 1e-3;
  Plan plan;
  plan.budget = uint64_t{1} << 20;
  plan.steps.resize(5);
  MeasuredRun run{.device = "emulated (host threads)", .threads = 2};
  run.steps.push_back({.loss = 2.5, .device_peak_bytes = 1000, .step_time_s = 0.2});
  run.steps.push_back({.loss = 2.25, .device_peak_bytes = 1000, .step_time_s = 0.1});
  run.eager_losses = {2.5, 2.25};
  run.eager_equal = true;
  RunPrediction p;
  p.device = 500;
  p.time = 0.05;
  p.time_with_run_kernels = 0.08;
  const NvmeReservation none;
  const nlohmann::json j = run_comparison_json(g, plan, "cpu", "stitching", run, p, none);
  EXPECT_EQ(j.at("graph"), "g");
  EXPECT_EQ(j.at("policy"), "stitching");
  EXPECT_EQ(j.at("measured_kernel_ops"), 1);
  EXPECT_EQ(j.at("plan_steps"), 5);
  ASSERT_EQ(j.at("steps").size(), 2u);
  EXPECT_EQ(j.at("steps")[1].at("device_peak_bytes").at("measured"), 1000);
  EXPECT_EQ(j.at("steps")[1].at("device_peak_bytes").at("predicted"), 500);
  EXPECT_EQ(j.at("steps")[1].at("step_time_s").at("predicted_with_run_kernels"), 0.08);
  EXPECT_EQ(j.at("steps")[1].at("eager_loss"), 2.25);
  EXPECT_EQ(j.at("eager_equal"), true);
  EXPECT_FALSE(j.contains("planned_arena_bytes"));  // no offsets
  const std::string text = run_comparison_text(g, plan, "cpu", run, p, none);
  EXPECT_NE(text.find("g: 5 plan steps on emulated (host threads) (2 threads), budget 1.00 MiB, "
                      "predicted with cpu (1 of 2 ops' times measured)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(2.000)"), std::string::npos) << text;  // the device peak, x pred
  EXPECT_NE(text.find("the median of steps 2-2"), std::string::npos) << text;
  EXPECT_NE(text.find("bitwise equal (losses and model states)"), std::string::npos) << text;
}

TEST(RunComparison, MeasuredOpsAreThoseWithATime) {
  Graph g;
  g.ops.resize(3);
  g.ops[1].time = 0.5;
  EXPECT_EQ(measured_ops(g), 1u);
}

}  // namespace
}  // namespace memwall
