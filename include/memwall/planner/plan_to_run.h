// `memwall plan` as library calls: a plan for a strategy (the automatic
// planner, one single technique, or one rematerialization planner) that
// runs where `memwall run` runs it, laid out in its budget (Note [Plans
// laid out by default] in plan_layout.h) or held by the runtime allocator,
// and planned again for less when it is neither (Note [Plans that run] in
// runnable_plan.cc). Every figure comes from the simulator.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/planner.h"
#include "memwall/planner/runnable_plan.h"
#include "memwall/remat/runner.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// "remat" (memwall's rematerialization planner) or "remat:NAME" (any
// registered one: remat_strategy in memwall/remat/runner.h); the other
// strategies are "auto" and single_technique_names().
bool is_remat_strategy(std::string_view strategy);

// The automatic planner ("auto") or one single technique for
// options.budget (0: default_budget), with the lower bound and the table of
// single techniques beside it. Throws Error when nothing fits (for a
// single technique: "NAME does not fit: why") or for an unknown technique.
AutoPlan plan_strategy(const Graph& graph, const Hardware& hardware, const PlannerOptions& options,
                       std::string_view strategy);

// A plan that runs, and the plan search it came from.
struct AutoPlanToRun {
  AutoPlan plan;  // plan.best is what runs (before layout); the table and bound are the budget's
  RunnablePlan runs;         // runs.plan: laid out, or checked on the allocator
  uint64_t planned_for = 0;  // the lower budget the plan was made for (0: the whole budget)
};

// `memwall plan --strategy auto` (or a single technique) with --out, end to
// end: plan_strategy, then the plan laid out in its budget (unless
// `lay_out` is false, --no-layout) or held by the stitching allocator, else
// planned again for less (plan_until_it_runs). Throws Error when nothing
// fits or no plan runs.
AutoPlanToRun plan_auto_to_run(const Graph& graph, const Hardware& hardware,
                               const PlannerOptions& options, std::string_view strategy,
                               bool lay_out = true);
// The same from a plan search already made (`a`, from plan_strategy with
// `options`): `a` becomes the search whose plan runs.
RunnablePlan make_auto_plan_run(AutoPlan& a, const Graph& graph, const Hardware& hardware,
                                const PlannerOptions& options, std::string_view strategy,
                                bool lay_out, uint64_t& planned_for);

// A rematerialization planner's plan (`run`, feasible: run_remat for
// `budget`) made to run in the same way; `run` becomes the planner's run
// for the budget whose plan runs. Throws Error, naming `strategy`, when no
// plan runs.
RunnablePlan make_remat_plan_run(RematRun& run, const Graph& graph, const Hardware& hardware,
                                 const RematPlanner& planner, uint64_t budget,
                                 const RematOptions& options, const SimOptions& sim_options,
                                 std::string_view strategy, bool lay_out, uint64_t& planned_for);

}  // namespace memwall
