// require_fit (remat.h): every planner's last step, so that a returned plan
// is one the simulator accepts within the budget.
#include <fmt/format.h>

#include "memwall/graph/error.h"
#include "memwall/remat/remat.h"

namespace memwall {

SimResult require_fit(const Graph& graph, const Hardware& hardware, const Plan& plan,
                      uint64_t budget, std::string_view planner) {
  // Simulating without a limit gives the peak even when it is over budget;
  // times do not depend on the budget, so the verdict within it is the same.
  Plan unlimited = plan;
  unlimited.budget = kMaxBytes;
  SimResult sim = simulate(graph, unlimited, hardware, {.record_curves = false});
  if (!sim.valid) fail("{}: the simulator rejects the plan: {}", planner, sim.reason);
  const uint64_t peak = sim.peak_bytes[static_cast<int>(Tier::kDevice)];
  if (peak > budget) {
    fail("{}: needs {} device bytes, over the budget of {} by {}", planner, peak, budget,
         peak - budget);
  }
  sim.budget = budget;
  return sim;
}

}  // namespace memwall
