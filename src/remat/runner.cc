// Running the rematerialization planners (runner.h).
#include "memwall/remat/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/plan/builders.h"

namespace memwall {
namespace {

std::string known_planners() {
  std::string known;
  for (const RematPlanner& p : remat_planners()) {
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return known;
}

// `points` budgets from `low` to `high`, both included, evenly spaced.
std::vector<uint64_t> budget_points(uint64_t low, uint64_t high, int64_t points) {
  std::vector<uint64_t> budgets;
  const double step = static_cast<double>(high - low) / static_cast<double>(points - 1);
  for (int64_t i = 0; i + 1 < points; ++i) {
    budgets.push_back(low + static_cast<uint64_t>(std::llround(step * static_cast<double>(i))));
  }
  budgets.push_back(high);
  return budgets;
}

}  // namespace

const RematPlanner& remat_planner_named(std::string_view name) {
  const RematPlanner* planner = find_remat_planner(name);
  if (planner == nullptr) {
    fail("unknown rematerialization planner '{}' (known: {})", name, known_planners());
  }
  return *planner;
}

const RematPlanner& remat_strategy(std::string_view strategy) {
  constexpr std::string_view kRemat = "remat";
  if (strategy == kRemat) return remat_planner_named("memwall");
  if (strategy.starts_with("remat:"))
    return remat_planner_named(strategy.substr(kRemat.size() + 1));
  fail("--strategy: unknown strategy '{}' (known: remat, remat:NAME with NAME one of {})", strategy,
       known_planners());
}

SimResult keep_all_simulation(const Graph& graph, const Hardware& hw) {
  const SimResult sim =
      simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw, {.record_curves = false});
  if (!sim.valid) fail("the simulator rejects the default plan: {}", sim.reason);
  return sim;
}

RematRun run_remat(const Graph& graph, const Hardware& hw, const RematPlanner& planner,
                   uint64_t budget, const RematOptions& options, const SimOptions& sim_options) {
  RematRun run;
  run.planner = std::string(planner.name);
  run.budget = budget;
  const auto start = std::chrono::steady_clock::now();
  try {
    run.result = planner.fn(graph, hw, budget, options);
  } catch (const Error& e) {
    run.error = e.what();
  }
  run.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.error.empty()) return run;
  run.result.plan.budget = budget;
  try {
    run.sim = simulate(graph, run.result.plan, hw, sim_options);
  } catch (const Error& e) {  // the plan does not fit the graph at all
    run.sim.valid = false;
    run.sim.reason = e.what();
  }
  run.feasible = run.sim.valid;
  if (!run.feasible) {
    run.rejected = true;
    run.error = fmt::format("the simulator rejects {}'s plan: {}", run.planner, run.sim.reason);
  }
  return run;
}

RematSweep sweep_remat_planners(const Graph& graph, const Hardware& hw,
                                const std::vector<const RematPlanner*>& planners, int64_t points,
                                const RematOptions& options) {
  RematSweep sweep;
  sweep.keep_all = keep_all_simulation(graph, hw);
  sweep.peak = device_peak(sweep.keep_all);
  // The budgets must not depend on the time limit: the floor search is not
  // one of the timed calls, and runs to its end.
  RematOptions floor_options = options;
  floor_options.time_limit = std::numeric_limits<double>::infinity();
  sweep.floor = remat_floor(graph, hw, floor_options);
  sweep.budgets = budget_points(std::min(sweep.floor.bytes, sweep.peak), sweep.peak, points);
  sweep.runs.resize(sweep.budgets.size());
  for (size_t b = 0; b < sweep.budgets.size(); ++b) {
    for (const RematPlanner* planner : planners) {
      sweep.runs[b].push_back(run_remat(graph, hw, *planner, sweep.budgets[b], options));
    }
  }
  return sweep;
}

BestRematRun::BestRematRun(const std::vector<RematRun>& runs) {
  const auto better = [](const RematRun* best, const RematRun& run) {
    return best == nullptr || run.sim.iteration_time < best->sim.iteration_time;
  };
  for (const RematRun& run : runs) {
    if (!run.feasible) continue;
    if (better(overall, run)) overall = &run;
    if (run.planner == kMemwallPlanner) {
      memwall = &run;
    } else if (better(baseline, run)) {
      baseline = &run;
    }
  }
}

std::optional<double> BestRematRun::memwall_ratio() const {
  if (memwall == nullptr || baseline == nullptr) return std::nullopt;
  return memwall->sim.iteration_time / baseline->sim.iteration_time;
}

void fail_no_remat_plan(const Graph& graph, const Hardware& hw, const RematRun& run,
                        const RematOptions& options) {
  if (run.planner == "memwall") {
    constexpr std::string_view kPrefix = "memwall: ";
    const std::string_view why = run.error;
    fail("{}", why.starts_with(kPrefix) ? why.substr(kPrefix.size()) : why);
  }
  const RematBound bound = remat_lower_bound(graph);
  if (run.budget < bound.bytes) {
    fail("{}; no plan can fit {}: {}, {} in all", run.error, exact_bytes(run.budget), bound.why,
         exact_bytes(bound.bytes));
  }
  RematFloor floor;
  try {
    floor = remat_floor(graph, hw, options);
  } catch (const Error& e) {
    fail("{} (memwall's planner's lowest budget is unknown: {})", run.error, e.what());
  }
  if (floor.cut_short) {
    // Stopped at the time limit: a plan at floor.bytes exists, no more is known.
    fail(
        "{}; memwall's planner (--strategy remat) reached a plan at {} before the time limit "
        "stopped its floor search; none can fit below {}",
        run.error, exact_bytes(floor.bytes), exact_bytes(bound.bytes));
  }
  if (floor.bytes <= run.budget) {
    fail("{}; memwall's planner (--strategy remat) finds a plan at every budget from {} up",
         run.error, exact_bytes(floor.bytes));
  }
  fail("{}; the lowest budget memwall's planner reaches is {}, where {}; none can fit below {}",
       run.error, exact_bytes(floor.bytes), floor.why, exact_bytes(bound.bytes));
}

}  // namespace memwall
