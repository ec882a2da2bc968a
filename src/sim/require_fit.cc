// simulate_unlimited and require_fit (simulator.h): how planners ask the
// simulator whether a plan fits.
#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/sim/simulator.h"

namespace memwall {

SimResult simulate_unlimited(const Graph& graph, const Hardware& hardware, const Plan& plan,
                             bool timeline) {
  Plan unlimited = plan;
  unlimited.budget = kMaxBytes;
  SimResult sim = simulate(graph, unlimited, hardware,
                           {.record_timeline = timeline, .record_curves = timeline});
  sim.budget = plan.budget;
  return sim;
}

SimResult require_fit(const Graph& graph, const Hardware& hardware, const Plan& plan,
                      uint64_t budget, std::string_view who) {
  SimResult sim = simulate_unlimited(graph, hardware, plan);
  if (!sim.valid) fail("{}: the simulator rejects the plan: {}", who, sim.reason);
  const uint64_t peak = device_peak(sim);
  if (peak > budget) {
    throw BudgetError(fmt::format("{}: needs {} device bytes, over the budget of {} by {}", who,
                                  peak, budget, peak - budget),
                      peak);
  }
  sim.budget = budget;
  return sim;
}

}  // namespace memwall
