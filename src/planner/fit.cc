// Fitting an activation planner into a model-state configuration.
//
// Note [Fitting activations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Activation planners (remat, Capuchin, vDNN) plan the planning view: the
// configuration's graph with what leaves the device weighing nothing. The
// model-state moves added afterwards still take device memory for a while
// (a gradient until its copy to the host ends, a parameter brought in
// ahead of its users, an update on its way to its apply), so the finished
// plan can exceed a budget its activation plan met. The activation budget
// then drops by the excess (plus 0.5% of the budget, so that the next try
// does not land on the edge again) and the planner runs again, at most
// kMaxTries times. The simulator judges every finished plan; the first
// that fits is kept, since a lower activation budget only adds work.
#include <limits>

#include <fmt/format.h>

#include "config_work.h"
#include "memwall/graph/deadline.h"
#include "memwall/graph/error.h"
#include "memwall/graph/stopwatch.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"
#include "memwall/swap/activations.h"

namespace memwall::planner_detail {
namespace {

constexpr int kMaxTries = 5;

// The activation plan for `budget`; throws Error when the planner finds none.
// `host_free`: host memory the model states leave for swapped activations.
Plan activation_plan(const Graph& view, Activations activations, const Hardware& hw,
                     uint64_t budget, uint64_t host_free, const PlannerOptions& options) {
  switch (activations) {
    case Activations::kKeepAll:
      break;  // fit() takes keep-all from the configuration's cached simulation
    case Activations::kRemat:
      return plan_memwall(view, hw, budget, {.time_limit = options.time_limit}).plan;
    case Activations::kCapuchinHost:
      return plan_capuchin(view, hw, budget, {.time_limit = options.time_limit}).plan;
    case Activations::kCapuchinNvme:
      return plan_capuchin(view, hw, budget,
                           {.time_limit = options.time_limit, .tier = Tier::kNvme})
          .plan;
    case Activations::kCapuchinSpill:
      return plan_capuchin(view, hw, budget,
                           {.time_limit = options.time_limit, .host_swap_bytes = host_free})
          .plan;
    case Activations::kVdnn:
      return plan_vdnn(view, hw, budget, {.time_limit = options.time_limit}).plan;
  }
  fail("no activation planner for {}", to_string(activations));
}

// Why a finished plan does not fit, as one line; empty when it fits.
std::string misfit(const SimResult& sim, const ConfigWork& work, const Hardware& hw,
                   uint64_t budget, const PlannerOptions& options) {
  if (!sim.valid) return sim.reason;
  const uint64_t device = device_peak(sim);
  if (device > budget) {
    return fmt::format("device memory exceeds the budget by {} bytes ({} > {})", device - budget,
                       device, budget);
  }
  return nvme_misfit(sim, work.graph, hw, options);
}

// Host memory left by the configuration's model-state traffic: its
// keep-all plan's host peak, simulated without a device limit, against the
// rank's share of the node's host memory.
uint64_t host_left(const ConfigWork& work, const Hardware& hw) {
  const SimResult& sim = work.keep_all(hw).sim;
  const uint64_t used = sim.peak_bytes[static_cast<size_t>(Tier::kHost)];
  const uint64_t share = rank_share(hw, graph_ranks(work.graph)).host_memory_bytes;
  return sim.valid && used < share ? share - used : 0;
}

}  // namespace

Candidate fit(const ConfigWork& work, Activations activations, const Hardware& hw, uint64_t budget,
              const PlannerOptions& options) {
  const Stopwatch clock;
  const Deadline deadline = Deadline::in(options.time_limit);
  Candidate c;
  c.activations = std::string(to_string(activations));
  c.states = work.config;
  uint64_t activation_budget = budget;
  uint64_t first_peak = 0;  // the finished plan's device peak at the whole budget
  const uint64_t host_free = activations == Activations::kCapuchinSpill ? host_left(work, hw) : 0;
  for (int attempt = 0; attempt < kMaxTries; ++attempt) {
    Plan plan;
    SimResult sim;
    if (activations == Activations::kKeepAll) {
      plan = work.keep_all(hw).plan;  // the budget does not change it
      sim = work.keep_all(hw).sim;
    } else {
      PlannerOptions left = options;
      left.time_limit = deadline.left();
      try {
        plan = work.finish(
            activation_plan(work.view, activations, hw, activation_budget, host_free, left));
      } catch (const Error& e) {
        // After a lowered budget, say so: the planner's message is about
        // the activation budget, not the device budget.
        c.why = attempt == 0 ? std::string(e.what())
                             : fmt::format(
                                   "the model-state moves took its plan for the whole budget to "
                                   "{} bytes; at an activation budget lowered to {} bytes, {}",
                                   first_peak, activation_budget, e.what());
        break;
      }
      plan.budget = kMaxBytes;  // to learn the peak; the verdict is misfit's
      sim = simulate(work.graph, plan, hw, {.record_curves = false});
    }
    c.why = misfit(sim, work, hw, budget, options);
    if (c.why.empty()) {
      plan.budget = budget;
      sim.budget = budget;
      c.fits = true;
      c.graph = work.graph;
      c.plan = std::move(plan);
      c.sim = std::move(sim);
      break;
    }
    if (!sim.valid || activations == Activations::kKeepAll) break;
    const uint64_t device = device_peak(sim);
    if (device <= budget) break;  // something else ran out
    if (attempt == 0) first_peak = device;
    const uint64_t cut = device - budget + budget / 200;
    if (cut >= activation_budget) break;
    if (deadline.passed()) {
      c.why += "; the time limit ran out before a try at a lower activation budget";
      break;
    }
    activation_budget -= cut;
  }
  c.solve_seconds = clock.seconds();
  return c;
}

}  // namespace memwall::planner_detail
