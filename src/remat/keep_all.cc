// keep-all: the default plan, every activation kept from forward to backward.
// The reference every other planner's overhead is measured against.
#include "memwall/plan/builders.h"
#include "planner_common.h"

namespace memwall {

RematResult plan_keep_all(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  return remat_detail::finish(graph, hardware, budget, default_plan(graph, hardware.name, budget),
                              "keep-all", "no recomputation", clock);
}

}  // namespace memwall

namespace memwall::remat_detail {

// Note [Keep-all first] in planner_common.h.
std::optional<RematResult> keep_all_if_it_fits(const Graph& graph, const Hardware& hardware,
                                               uint64_t budget, std::string_view planner,
                                               const Stopwatch& clock) {
  Plan plan = default_plan(graph, hardware.name, budget);
  const SimResult sim = simulate(graph, plan, hardware, {.record_curves = false});
  if (!sim.valid || device_peak(sim) > budget) return std::nullopt;
  RematResult result =
      result_of(sim, std::move(plan), planner,
                "the default schedule fits: nothing recomputed (Note [Keep-all first])", clock);
  result.proven_optimal = true;  // no schedule computes less
  return result;
}

}  // namespace memwall::remat_detail
