// Running the rematerialization planners (`memwall plan --strategy remat`,
// `memwall bench remat`): a planner by name, the keep-all reference, one
// planner run whose figures all come from re-simulating the plan (the
// simulator is the judge, never the planner), and the one-line error when
// none fits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// The registered planner `name`; throws Error listing the known ones.
const RematPlanner& remat_planner_named(std::string_view name);

// `--strategy`: "remat" (memwall's own planner) or "remat:NAME" (any
// registered planner); throws Error for anything else.
const RematPlanner& remat_strategy(std::string_view strategy);

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

// `memwall bench remat`'s sweep: every planner of `planners` at `points`
// budgets (at least 2) evenly spaced from the lowest one memwall's planner
// reaches (remat_floor, run to its end whatever options.time_limit says, so
// that the budgets do not depend on it) to the keep-all peak, both
// included.
struct RematSweep {
  SimResult keep_all;  // keep_all_simulation
  uint64_t peak = 0;   // its device peak
  RematFloor floor;
  std::vector<uint64_t> budgets;
  std::vector<std::vector<RematRun>> runs;  // [budget][planner]
};
RematSweep sweep_remat_planners(const Graph& graph, const Hardware& hw,
                                const std::vector<const RematPlanner*>& planners, int64_t points,
                                const RematOptions& options);

// The name of memwall's own planner, the one the baselines are measured against.
inline constexpr std::string_view kMemwallPlanner = "memwall";

// The best planner at one budget: the lowest overhead (the first in display
// order on ties), and the best of the baselines (every planner but memwall's).
struct BestRematRun {
  const RematRun* overall = nullptr;
  const RematRun* baseline = nullptr;
  const RematRun* memwall = nullptr;

  explicit BestRematRun(const std::vector<RematRun>& runs);
  // memwall's iteration time / the best baseline's (nullopt: one is missing).
  std::optional<double> memwall_ratio() const;
};

// The one-line Error for a run that found no plan within its budget.
// memwall's own message gives the lowest budget it reaches or the proven
// bound the budget is under (Note [Floor search] in src/remat/memwall.cc);
// another planner's is completed with the same figures.
[[noreturn]] void fail_no_remat_plan(const Graph& graph, const Hardware& hw, const RematRun& run,
                                     const RematOptions& options);

}  // namespace memwall
