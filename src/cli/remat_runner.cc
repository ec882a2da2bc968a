#include "remat_runner.h"

#include <chrono>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/plan/builders.h"

namespace memwall::cli {
namespace {

std::string known_planners() {
  std::string known;
  for (const RematPlanner& p : remat_planners()) {
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return known;
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

double checked_time_limit(double seconds) {
  if (!(seconds > 0) || seconds > 86400) {
    fail("--time-limit must be a number of seconds in (0, 86400] (got {})", seconds);
  }
  return seconds;
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

}  // namespace memwall::cli
