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
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "config_work.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/graph/describe.h"
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
      // One call per configuration and try: without Checkmate's seconds
      // below the floor of the other proposers (RematOptions).
      return plan_memwall(
                 view, hw, budget,
                 {.time_limit = options.time_limit, .memwall_checkmate_below_floor = false})
          .plan;
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
    case Activations::kCheckpoint: {
      const RematPlanner* planner = find_remat_planner(options.checkpointing);
      if (planner == nullptr) fail("unknown checkpointing '{}'", options.checkpointing);
      return planner->fn(view, hw, budget, {.time_limit = options.time_limit}).plan;
    }
  }
  fail("no activation planner for {}", to_string(activations));
}

// Why a finished plan does not fit, as one line and as numbers; why empty
// when it fits. A device overrun names the step that reached the peak; when
// the node's memory runs out too, the further off comes first, since it
// binds (Note [What ran out] in no_plan.cc).
Misfit misfit(const SimResult& sim, const Plan& plan, const ConfigWork& work, const Hardware& hw,
              uint64_t budget, const PlannerOptions& options) {
  Misfit node = node_misfit(sim, work.graph, hw, options);
  const uint64_t device = device_peak(sim);
  if (device <= budget) return node;
  std::string at;
  if (sim.device_peak_step < plan.steps.size()) {
    const Step& s = plan.steps[sim.device_peak_step];
    const bool runs = s.kind == StepKind::kCompute || s.kind == StepKind::kRecompute;
    at = fmt::format(
        " at step {} ({} of {})", sim.device_peak_step, to_string(s.kind),
        runs ? detail::op_label(work.graph, s.op) : detail::buffer_label(work.graph, s.buf));
  }
  Misfit over{fmt::format("device memory exceeds the budget by {} bytes ({} > {}){}",
                          device - budget, device, budget, at),
              {Tier::kDevice, device, budget}};
  if (node.why.empty()) return over;
  const bool node_worse = node.short_of.ratio() > over.short_of.ratio();
  Misfit& worse = node_worse ? node : over;
  const Misfit& other = node_worse ? over : node;
  worse.why += "; and " + other.why;
  return worse;
}

// Host memory left by the configuration's model-state traffic: its
// keep-all plan's host peak, simulated without a device limit, against the
// rank's share of the node's host memory.
uint64_t host_left(const ConfigWork& work, const Hardware& hw) {
  const SimResult& sim = work.keep_all(hw).sim;
  const uint64_t used = sim.peak_bytes[static_cast<size_t>(Tier::kHost)];
  const uint64_t share = rank_share(hw, graph_gpus(work.graph)).host_memory_bytes;
  return sim.valid && used < share ? share - used : 0;
}

}  // namespace

Candidate fit(const ConfigWork& work, Activations activations, const Hardware& hw, uint64_t budget,
              const PlannerOptions& options) {
  const Stopwatch clock;
  const Deadline deadline = Deadline::in(options.time_limit);
  Candidate c;
  c.activations = activations == Activations::kCheckpoint ? "remat:" + options.checkpointing
                                                          : std::string(to_string(activations));
  c.states = work.config;
  uint64_t activation_budget = budget;
  uint64_t first_peak = 0;           // the finished plan's device peak at the whole budget
  uint64_t lowest_peak = kMaxBytes;  // the lowest device peak of a finished plan over it
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
        // the activation budget, not the device budget, and the closest it
        // came is the plan for the whole budget.
        c.why = attempt == 0 ? std::string(e.what())
                             : fmt::format(
                                   "the model-state moves took its plan for the whole budget to "
                                   "{} bytes; at an activation budget lowered to {} bytes, {}",
                                   first_peak, activation_budget, e.what());
        const auto* over = dynamic_cast<const BudgetError*>(&e);
        if (attempt > 0) {
          c.short_of = {Tier::kDevice, lowest_peak, budget};
        } else if (over != nullptr) {
          c.short_of = {Tier::kDevice, over->lowest(), budget};
        }
        // The activation planner sees the device alone; where even every
        // activation kept overruns the host or NVMe, and further off, that
        // binds (Note [What ran out] in no_plan.cc).
        Misfit node = node_misfit(work.keep_all(hw).sim, work.graph, hw, options);
        if (node.short_of.limit > 0 && node.short_of.ratio() > c.short_of.ratio()) {
          c.why = fmt::format("{} (every activation kept); and {}", node.why, c.why);
          c.short_of = node.short_of;
        }
        break;
      }
      plan.budget = kMaxBytes;  // to learn the peak; the verdict is misfit's
      sim = simulate(work.graph, plan, hw, {.record_curves = false});
    }
    Misfit m = misfit(sim, plan, work, hw, budget, options);
    if (m.short_of.memory == Tier::kDevice && m.short_of.limit > 0) {
      lowest_peak = std::min(lowest_peak, m.short_of.need);
      m.short_of.need = lowest_peak;
    }
    c.why = std::move(m.why);
    c.short_of = m.short_of;
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
