// Rematerialization planners for the command line (`memwall plan`,
// `memwall bench remat`): a planner by name, the keep-all reference, and one
// planner run whose figures all come from re-simulating the plan (the
// simulator is the judge, never the planner).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"

namespace memwall::cli {

// The registered planner `name`; throws Error listing the known ones.
const RematPlanner& remat_planner_named(std::string_view name);

// `--strategy`: "remat" (memwall's own planner) or "remat:NAME" (any
// registered planner); throws Error for anything else.
const RematPlanner& remat_strategy(std::string_view strategy);

// A --time-limit in seconds, within (0, 86400]; throws Error otherwise.
double checked_time_limit(double seconds);

// The default plan (every activation kept) simulated without a budget: the
// reference of overheads, and its device peak the largest useful budget.
SimResult keep_all_simulation(const Graph& graph, const Hardware& hw);

struct RematRun {
  std::string planner;
  uint64_t budget = 0;
  // The planner returned a plan the simulator accepts within the budget.
  bool feasible = false;
  // When not feasible: the planner's message, or the simulator's verdict.
  std::string error;
  bool rejected = false;  // the planner returned a plan the simulator rejects
  RematResult result;     // the planner's answer (plan, note, optimality)
  SimResult sim;          // result.plan re-simulated within `budget`
  double wall_seconds = 0;

  uint64_t peak() const { return device_peak(sim); }
  // Iteration time / the keep-all iteration time.
  double overhead(const SimResult& keep_all) const {
    return sim.iteration_time / keep_all.iteration_time;
  }
};

// Runs `planner` for `budget` and re-simulates its plan with `sim_options`.
// A planner's Error makes the run infeasible; so does a plan the simulator
// rejects (`rejected`, a planner bug).
RematRun run_remat(const Graph& graph, const Hardware& hw, const RematPlanner& planner,
                   uint64_t budget, const RematOptions& options,
                   const SimOptions& sim_options = {.record_curves = false});

}  // namespace memwall::cli
