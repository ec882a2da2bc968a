// `memwall plan` as library calls (plan_to_run.h).
#include "memwall/planner/plan_to_run.h"

#include <algorithm>
#include <functional>

#include "memwall/base/deadline.h"
#include "memwall/base/error.h"

namespace memwall {
namespace {

// A single technique's plan for `budget`, with the hardware and budget it
// ran on.
AutoPlan technique_for(const Graph& graph, const Hardware& hw, const PlannerOptions& options,
                       std::string_view technique, uint64_t budget) {
  AutoPlan t;
  PlannerOptions with_budget = options;
  with_budget.budget = budget;
  t.hardware = hw;
  if (options.host_bytes > 0) t.hardware.host_memory_bytes = options.host_bytes;
  t.budget = budget;
  t.best = plan_single_technique(graph, hw, with_budget, technique);
  return t;
}

}  // namespace

bool is_remat_strategy(std::string_view strategy) {
  return strategy == "remat" || strategy.starts_with("remat:");
}

AutoPlan plan_strategy(const Graph& graph, const Hardware& hw, const PlannerOptions& options,
                       std::string_view strategy) {
  if (strategy == "auto") return plan_auto(graph, hw, options);
  // One technique: its plan, or why it does not fit.
  PlannerOptions with_budget = options;
  with_budget.budget = options.budget > 0 ? options.budget : default_budget(hw);
  const Deadline deadline = Deadline::in(with_budget.time_limit);
  AutoPlan a = technique_for(graph, hw, options, strategy, with_budget.budget);
  a.bound = iteration_lower_bound(graph, a.hardware, with_budget);
  if (!a.best.fits) fail("{} does not fit: {}", strategy, a.best.why);
  // The table shares the time limit (Note [Time limits are wall time]).
  with_budget.time_limit = std::max(deadline.left(), 1e-9);
  a.singles = single_techniques(graph, hw, with_budget);
  a.solve_seconds = a.best.solve_seconds;
  return a;
}

// Note [Planning for the layout]: a plan within the budget may still have
// no layout within it: parameters streamed in per use and kept apart
// between their forward and backward runs fragment the arena (Llama-2-7B's
// demo plan needs 1.067x its live peak). Nor may the stitching allocator
// hold it. Then memwall plans again for less (Note [Plans that run],
// plan_until_it_runs) and keeps the new plan when it runs in the whole
// budget, with the whole budget's bound and table.
RunnablePlan make_auto_plan_run(AutoPlan& a, const Graph& graph, const Hardware& hw,
                                const PlannerOptions& options, std::string_view strategy,
                                bool lay_out, uint64_t& planned_for) {
  AutoPlan again;
  const PlanFor replan = [&](uint64_t lower) -> std::optional<RunnablePlan> {
    try {
      if (strategy != "auto") {
        again = technique_for(graph, hw, options, strategy, lower);
      } else {
        PlannerOptions lowered = options;
        lowered.budget = lower;
        again = plan_auto(graph, hw, lowered);
      }
    } catch (const Error&) {
      return std::nullopt;
    }
    if (!again.best.fits) return std::nullopt;
    again.best.plan.budget = a.budget;  // it runs in the whole budget
    return runnable_plan(again.best.plan, again.best.graph, again.hardware, lay_out);
  };
  const auto adopt = [&] {
    again.best.sim.budget = a.budget;
    again.budget = a.budget;
    again.bound = a.bound;
    again.singles = std::move(a.singles);
    again.solve_seconds += a.solve_seconds;
    again.configs_tried += a.configs_tried;
    a = std::move(again);
  };
  return plan_until_it_runs(runnable_plan(a.best.plan, a.best.graph, a.hardware, lay_out), a.budget,
                            strategy, replan, adopt, planned_for);
}

AutoPlanToRun plan_auto_to_run(const Graph& graph, const Hardware& hw,
                               const PlannerOptions& options, std::string_view strategy,
                               bool lay_out) {
  AutoPlanToRun out;
  out.plan = plan_strategy(graph, hw, options, strategy);
  out.runs = make_auto_plan_run(out.plan, graph, hw, options, strategy, lay_out, out.planned_for);
  return out;
}

RunnablePlan make_remat_plan_run(RematRun& run, const Graph& graph, const Hardware& hw,
                                 const RematPlanner& planner, uint64_t budget,
                                 const RematOptions& options, const SimOptions& sim_options,
                                 std::string_view strategy, bool lay_out, uint64_t& planned_for) {
  std::optional<RematRun> again;
  const PlanFor plan_for = [&](uint64_t lower) -> std::optional<RunnablePlan> {
    again = run_remat(graph, hw, planner, lower, options, sim_options);
    if (!again->feasible) return std::nullopt;
    again->result.plan.budget = budget;  // it runs in the whole budget
    return runnable_plan(again->result.plan, graph, hw, lay_out);
  };
  return plan_until_it_runs(
      runnable_plan(run.result.plan, graph, hw, lay_out), budget, strategy, plan_for,
      [&] { run = std::move(*again); }, planned_for);
}

}  // namespace memwall
