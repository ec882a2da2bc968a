// The automatic planner against the best single technique (versus_singles.h).
#include "memwall/planner/versus_singles.h"

#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/planner/planner.h"
#include "memwall/sim/simulator.h"

namespace memwall {
namespace {

// Re-simulates a fitting candidate within its budget.
bool simulates_within(const Candidate& c, const Hardware& hw, uint64_t budget) {
  if (!c.fits) return true;
  const SimResult sim = simulate(c.graph, c.plan, hw, {.record_curves = false});
  return sim.valid && device_peak(sim) <= budget && c.plan.budget == budget;
}

}  // namespace

AutoVersusSingles compare_with_singles(const Graph& graph, const Hardware& hw, uint64_t budget,
                                       double time_limit) {
  AutoVersusSingles r{.budget = budget};
  const Stopwatch clock;
  try {
    const AutoPlan a = plan_auto(graph, hw, {.budget = budget, .time_limit = time_limit});
    r.auto_fits = true;
    r.auto_time = a.best.sim.iteration_time;
    r.auto_config = a.best.states.name() + "; " + a.best.activations;
    r.within_budget = simulates_within(a.best, a.hardware, budget);
    for (const Candidate& c : a.singles) {
      r.within_budget = r.within_budget && simulates_within(c, a.hardware, budget);
      if (c.fits && (r.best_single.empty() || c.sim.iteration_time < r.best_single_time)) {
        r.best_single = c.technique;
        r.best_single_time = c.sim.iteration_time;
      }
    }
  } catch (const Error& e) {
    r.why = e.what();
  }
  r.seconds = clock.seconds();
  return r;
}

}  // namespace memwall
