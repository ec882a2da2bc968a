// `memwall plan` as library calls (src/planner/plan_to_run.cc): the
// automatic planner's plan laid out in its budget and run-checked, as
// `memwall plan --out` writes it (Note [Plans that run]); a single
// technique's; a rematerialization planner's; and the numbers people read
// (base/human.h), which the planner's messages use.
#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/plan_to_run.h"
#include "memwall/remat/runner.h"
#include "memwall/sim/simulator.h"

namespace memwall {
namespace {

// The pinned plan is valid, within its budget and the simulator checks its
// offsets.
void expect_laid_out(const RunnablePlan& r, const Graph& graph, const Hardware& hw,
                     uint64_t budget) {
  ASSERT_TRUE(r.runs) << r.why_not();
  ASSERT_TRUE(r.laid.has_value());
  ASSERT_TRUE(r.laid->pinned) << r.laid->row_text;
  EXPECT_FALSE(r.plan.offsets.empty());
  EXPECT_EQ(r.plan.budget, budget);
  EXPECT_LE(r.laid->arena, budget);
  const SimResult sim = simulate(graph, r.plan, hw, {.record_curves = false});
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(sim.peak_bytes[0], budget);
}

TEST(PlanToRun, AutoPlanIsLaidOutInItsBudget) {
  const Hardware hw = find_gpu("a100-40g");
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const uint64_t budget = memory_profile(graph).peak_bytes / 2;
  const AutoPlanToRun out =
      plan_auto_to_run(graph, hw, {.budget = budget, .time_limit = 30}, "auto");
  EXPECT_EQ(out.plan.best.technique, "auto");
  EXPECT_EQ(out.plan.budget, budget);
  EXPECT_FALSE(out.plan.singles.empty());
  expect_laid_out(out.runs, out.plan.best.graph, out.plan.hardware, budget);
  EXPECT_TRUE(out.runs.json()["runs"].get<bool>());
}

TEST(PlanToRun, SingleTechniqueRunsOrSaysWhy) {
  const Hardware hw = find_gpu("a100-40g");
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const uint64_t budget = memory_profile(graph).peak_bytes / 2;
  const AutoPlan a = plan_strategy(graph, hw, {.budget = budget, .time_limit = 30}, "zero-offload");
  EXPECT_EQ(a.best.technique, "zero-offload");
  EXPECT_TRUE(a.best.fits);
  EXPECT_GT(a.bound.seconds, 0);
  // Far below any plan: the technique's own reason, as one line.
  try {
    plan_strategy(graph, hw, {.budget = 1000, .time_limit = 30}, "vdnn");
    FAIL() << "a plan within 1000 bytes";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("vdnn does not fit: ")) << e.what();
  }
  EXPECT_TRUE(is_remat_strategy("remat"));
  EXPECT_TRUE(is_remat_strategy("remat:chen-sqrt"));
  EXPECT_FALSE(is_remat_strategy("auto"));
}

TEST(PlanToRun, RematPlanIsLaidOut) {
  const Hardware hw = find_gpu("a100-40g");
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 256});
  const uint64_t budget = device_peak(keep_all_simulation(graph, hw)) * 9 / 10;
  const RematPlanner& planner = remat_strategy("remat:chen-sqrt");
  const RematOptions options{.time_limit = 30};
  RematRun run = run_remat(graph, hw, planner, budget, options);
  ASSERT_TRUE(run.feasible) << run.error;
  uint64_t planned_for = 0;
  const RunnablePlan r = make_remat_plan_run(run, graph, hw, planner, budget, options,
                                             {.record_curves = false}, "remat:chen-sqrt",
                                             /*lay_out=*/true, planned_for);
  expect_laid_out(r, graph, hw, budget);
}

TEST(PlanToRun, NumbersAsPeopleReadThem) {
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(uint64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(grouped(1234567), "1,234,567");
  EXPECT_EQ(exact_bytes(2048), "2,048 B (2.00 KiB)");
  EXPECT_EQ(human_seconds(0.0456), "45.60 ms");
  EXPECT_EQ(human_flops(1.2e10), "12.00 GFLOP");
}

}  // namespace
}  // namespace memwall
