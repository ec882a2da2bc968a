// The automatic planner on forward-only programs (issue 19): it plans them
// below their keep-all peak with recomputation or swapping, never slower
// than a single technique (remat/forward_only_graphs.h has the figures).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "memwall/planner/planner.h"
#include "memwall/sim/simulator.h"
#include "remat/forward_only_graphs.h"
#include "test_util.h"

namespace memwall {
namespace {

// U-Net-like: keep-all 200, the least any schedule reaches 152 (recompute
// enc1 for dec1). Generator: keep-all 324, bound 244 (recompute project).
TEST(AutoPlannerForwardOnly, PlansBelowTheKeepAllPeak) {
  const Hardware& hw = find_gpu("a100-80g");
  struct Program {
    Graph graph;
    uint64_t budget;
    uint64_t peak;
  };
  const Program cases[] = {{testing::unet_like(), 160, 152},
                           {testing::unrolled_generator(6), 300, 244}};
  for (const Program& c : cases) {
    SCOPED_TRACE(fmt::format("{} at {} bytes", c.graph.name, c.budget));
    const PlannerOptions options{.budget = c.budget, .time_limit = search_seconds(2)};
    const AutoPlan a = plan_auto(c.graph, hw, options);
    ASSERT_TRUE(a.best.fits) << a.best.why;
    const SimResult sim = simulate(a.best.graph, a.best.plan, hw);
    ASSERT_TRUE(sim.valid) << sim.reason;
    EXPECT_EQ(device_peak(sim), c.peak);
    for (const Candidate& single : a.singles) {
      if (single.fits) {
        EXPECT_LE(a.best.sim.iteration_time, single.sim.iteration_time) << single.technique;
      }
    }
  }
}

}  // namespace
}  // namespace memwall
