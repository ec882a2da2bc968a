// The automatic planner on a graph whose optimizer step is traced, several
// ops per parameter (Note [Traced optimizer steps] in
// src/swap/optimizer_steps.cc): it plans at every budget down to where the
// states must leave the device, the configuration that needs no rewrite
// plans the graph as it is, and steps it cannot split skip only the
// configurations that rewrite them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/planner.h"
#include "swap/traced_adam.h"
#include "test_util.h"

namespace memwall {
namespace {

using testing::traced_adam;
using testing::TracedAdam;

void expect_traced_plan_within(const Candidate& c, const Hardware& hw, uint64_t budget) {
  ASSERT_TRUE(c.fits) << c.why;
  EXPECT_EQ(c.plan.budget, budget);
  const SimResult sim = simulate(c.graph, c.plan, hw);
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(sim.peak_bytes[0], budget);
  EXPECT_DOUBLE_EQ(sim.iteration_time, c.sim.iteration_time);
}

bool same_ops(const Graph& a, const Graph& b) {
  if (a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    if (a.ops[i].name != b.ops[i].name) return false;
  }
  return true;
}

bool all_on_device(const StateConfig& c) {
  return c.stage == 0 && c.optimizer == Tier::kDevice && c.params == Tier::kDevice;
}

TEST(TracedPlanner, PlansTracedAdamDownToOffloading) {
  const TracedAdam t = traced_adam();
  const Hardware& hw = find_gpu("a100-40g");
  const uint64_t peak = memory_profile(t.graph).peak_bytes;
  for (const double fraction : {1.0, 0.6, 0.4}) {
    SCOPED_TRACE(fmt::format("{:.0f}% of the keep-all peak", 100 * fraction));
    const auto budget = static_cast<uint64_t>(fraction * static_cast<double>(peak));
    const AutoPlan a = plan_auto(t.graph, hw, {.budget = budget, .time_limit = search_seconds(2)});
    expect_traced_plan_within(a.best, hw, budget);
    EXPECT_TRUE(a.skipped.empty());
    if (all_on_device(a.best.states)) {
      EXPECT_TRUE(same_ops(a.best.graph, t.graph));
    }
    for (const Candidate& c : a.singles) {
      if (!c.fits) continue;
      expect_traced_plan_within(c, hw, budget);
      EXPECT_LE(a.best.sim.iteration_time, c.sim.iteration_time) << c.technique;
    }
    // At 40% the parameters and the Adam moments alone exceed the budget.
    if (fraction < 0.5) {
      EXPECT_NE(a.best.states.optimizer, Tier::kDevice);
    }
  }
}

TEST(TracedPlanner, SingleTechniquesKeepOrFuseTheTracedOps) {
  const TracedAdam t = traced_adam();
  const Hardware& hw = find_gpu("a100-40g");
  const uint64_t budget = memory_profile(t.graph).peak_bytes;
  const std::vector<Candidate> singles = single_techniques(t.graph, hw, {.budget = budget});
  ASSERT_EQ(singles.size(), 7u);
  for (const Candidate& c : singles) {
    SCOPED_TRACE(c.technique);
    expect_traced_plan_within(c, hw, budget);
    if (all_on_device(c.states)) {
      EXPECT_TRUE(same_ops(c.graph, t.graph));  // remat, vDNN, Capuchin: the traced ops
    } else {
      // One op per step, and an apply for each CPU step of a parameter
      // on the device (none for device chunks, Note [Device chunks]).
      const auto applies = static_cast<size_t>(
          std::count_if(c.graph.ops.begin(), c.graph.ops.end(),
                        [](const Op& op) { return op.name.ends_with(".apply"); }));
      EXPECT_EQ(c.graph.ops.size(), 12u + 3 + applies);
      if (c.states.optimizer_device_share == 0 && !c.states.paged) {
        EXPECT_EQ(applies, c.states.params == Tier::kDevice ? 3u : 0u);
      }
    }
  }
}

TEST(TracedPlanner, UnsplittableStepsSkipTheConfigurationsThatRewriteThem) {
  TracedAdam t = traced_adam();
  t.graph.ops.back().updates = {t.params[0], t.params[1], t.params[2]};  // a foreach op
  const Hardware& hw = find_gpu("a100-40g");
  const uint64_t peak = memory_profile(t.graph).peak_bytes;
  const AutoPlan a = plan_auto(t.graph, hw, {.budget = peak, .time_limit = search_seconds(2)});
  expect_traced_plan_within(a.best, hw, peak);
  EXPECT_TRUE(all_on_device(a.best.states));
  EXPECT_TRUE(same_ops(a.best.graph, t.graph));
  ASSERT_EQ(a.skipped.size(), 6u);  // every placement but all on the device, and paging
  for (const SkippedConfig& s : a.skipped) {
    EXPECT_FALSE(all_on_device(s.config));
    EXPECT_NE(s.why.find(R"(op 35 ("w2.addcdiv_") updates 3 parameters)"), std::string::npos)
        << s.why;
  }
  for (const Candidate& c : a.singles) {
    if (all_on_device(c.states)) continue;
    EXPECT_FALSE(c.fits) << c.technique;
    EXPECT_NE(c.why.find("does not apply: op 35"), std::string::npos) << c.why;
  }
  // Below what the device configuration reaches, the error says what was skipped.
  try {
    plan_auto(t.graph, hw, {.budget = peak / 4, .time_limit = search_seconds(2)});
    ADD_FAILURE() << "planned below the model states";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(6 configurations skipped: op 35"), std::string::npos)
        << e.what();
  }
  // Several ranks need ZeRO's rewrite in every configuration.
  try {
    plan_auto(t.graph, hw, {.budget = peak, .ranks = 2, .time_limit = search_seconds(2)});
    ADD_FAILURE() << "planned several ranks without per-parameter steps";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no model-state configuration applies (op 35"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace memwall
