// Helpers the remat planners share (internal to src/remat).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memwall/base/deadline.h"
#include "memwall/base/stopwatch.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"

namespace memwall::remat_detail {

using memwall::Stopwatch;

// Note [Time limits are wall time]: where the planner's own work stops.
inline Deadline work_deadline(const RematOptions& options) {
  return memwall::work_deadline(options.time_limit);
}

// A plan wrapped as a result, with the simulator's figures for it.
inline RematResult result_of(const SimResult& sim, Plan plan, std::string_view planner,
                             std::string note, const Stopwatch& clock) {
  RematResult result;
  result.simulated_peak = device_peak(sim);
  result.simulated_time = sim.iteration_time;
  result.plan = std::move(plan);
  result.planner = std::string(planner);
  result.note = std::move(note);
  result.solve_seconds = clock.seconds();
  return result;
}

// Checks the plan fits (require_fit) and wraps it as a result.
inline RematResult finish(const Graph& graph, const Hardware& hardware, uint64_t budget, Plan plan,
                          std::string_view planner, std::string note, const Stopwatch& clock) {
  const SimResult sim = require_fit(graph, hardware, plan, budget, planner);
  return result_of(sim, std::move(plan), planner, std::move(note), clock);
}

// Note [Keep-all first]: computing every op once is the least compute any
// schedule has, so where the default schedule fits the budget (simulated)
// it is the optimum of the planners that minimize recomputation (Rotor,
// Checkmate). Their models are coarser than the simulator (Rotor's memory
// slots round every size up, Checkmate's large graphs are Rotor's chain),
// and at budgets the default schedule fits exactly they found nothing: on
// a traced Inception v3 at its keep-all peak, "the MILP is infeasible"
// (issue 19). They return this plan first; nullopt when it does not fit.
std::optional<RematResult> keep_all_if_it_fits(const Graph& graph, const Hardware& hardware,
                                               uint64_t budget, std::string_view planner,
                                               const Stopwatch& clock);

// Checkpointing by layer (per-layer, selective-op): what a layer hands to
// another region (its output, the next layer's input, the head's input) is
// kept, and held until the recompute that reads it (Note [Checkpoints are
// held] in checkpoints.cc). layer_of: per op; producer_layer: per buffer.
inline void keep_layer_inputs(const Graph& graph, std::span<const int> layer_of,
                              std::span<const int> producer_layer, std::vector<uint8_t>& keep,
                              std::vector<uint8_t>& hold) {
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.in) {
      if (producer_layer[b] != layer_of[op.id]) keep[b] = hold[b] = 1;
    }
  }
}

// The checkpointing plan of `keep` for this budget and hardware.
inline Plan checkpoint_plan(const Graph& graph, const Hardware& hardware, uint64_t budget,
                            std::span<const uint8_t> keep, std::span<const uint8_t> hold = {}) {
  return plan_with_checkpoints(graph, keep, hardware.name, budget, hold);
}

// chen-greedy's candidate plans, one per distinct checkpoint set of its
// threshold grid, each simulated without a limit (chen_greedy.cc). The
// planner returns the fastest that fits; memwall's floor needs the lowest.
struct ChenGreedyPlan {
  Plan plan;  // budget: kMaxBytes
  double threshold = 0;
  size_t checkpoints = 0;
  double time = 0;
  uint64_t peak = 0;
};
std::vector<ChenGreedyPlan> chen_greedy_plans(const Graph& graph, const Hardware& hardware);

// chen-sqrt's rule alone, without keep-all first: the sqrt(n) segmentation
// whatever the budget (memwall's floor search proposes it as such).
RematResult chen_sqrt_rule(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options);

}  // namespace memwall::remat_detail
