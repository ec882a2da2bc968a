#include "layout_runner.h"

#include <algorithm>
#include <chrono>

#include "format.h"
#include "memwall/base/error.h"
#include "memwall/cli/plan_layout.h"
#include "memwall/layout/default_layout.h"
#include "memwall/layout/exact.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"
#include "memwall/sim/simulator.h"

namespace memwall::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::vector<std::string> layout_algorithm_names() {
  std::vector<std::string> names = {"default"};
  for (const LayoutHeuristic& h : layout_heuristics()) names.emplace_back(h.name);
  names.emplace_back("exact");
  return names;
}

bool LayoutRun::fits() const { return layout && fits_capacity; }

double LayoutRun::ratio() const {
  if (!layout || lower_bound == 0) return 0;
  return static_cast<double>(layout->arena) / static_cast<double>(lower_bound);
}

LayoutRun run_layout(const LayoutProblem& problem, std::string_view algorithm, double time_limit) {
  LayoutRun run;
  run.algorithm = algorithm;
  const auto start = Clock::now();
  run.lower_bound = arena_lower_bound(problem);
  if (algorithm == "default") {
    DefaultLayoutResult r = solve_default_layout(problem, {.time_budget = time_limit});
    run.lower_bound = std::max(run.lower_bound, r.lower_bound);
    run.optimal = r.optimal;
    run.found_by = r.algorithm;
    run.layout = std::move(r.layout);
  } else if (algorithm == "exact") {
    ExactResult e = solve_exact(problem, {.capacity = problem.capacity, .time_limit = time_limit});
    run.layout = std::move(e.layout);
    run.lower_bound = std::max(run.lower_bound, e.best_lower_bound);
    run.optimal = e.proven_optimal;
    run.infeasible = e.proven_infeasible;
  } else if (const LayoutHeuristic* h = find_layout_heuristic(algorithm)) {
    run.layout = h->run(problem);
  } else {
    std::string known;
    for (const std::string& name : layout_algorithm_names()) {
      known += (known.empty() ? "" : ", ") + name;
    }
    fail("unknown layout algorithm '{}' (known: {})", algorithm, known);
  }
  run.seconds = since(start);
  if (run.found_by.empty()) run.found_by = run.algorithm;
  if (run.layout) {
    // Heuristics ignore the capacity: judge the fit apart from validity.
    LayoutProblem unbounded = problem;
    unbounded.capacity = 0;
    if (auto why = check_layout(unbounded, *run.layout)) {
      fail("internal error: {} produced an invalid layout: {}", algorithm, *why);
    }
    run.fits_capacity = problem.capacity == 0 || run.layout->arena <= problem.capacity;
    if (run.layout->arena == run.lower_bound) run.optimal = true;
  }
  return run;
}

// Note [Plans laid out by default]
PlanLayout lay_out_plan(const Plan& plan, const Graph& graph, const Hardware& hw,
                        double time_limit) {
  PlanLayout out;
  out.plan = plan;
  out.plan.offsets.clear();
  out.plan.stay_offsets.clear();
  out.plan.workspace_offsets.clear();
  const SimResult sim =
      simulate(graph, out.plan, hw, {.record_curves = false, .record_residency = true});
  if (!sim.valid) fail("internal error: the simulator rejects the plan: {}", sim.reason);
  out.live_peak = sim.peak_bytes[0];
  StayLayoutProblem stays =
      stay_layout_problem(graph, out.plan, sim.residencies, sim.workspaces, plan.budget);
  LayoutProblem& problem = stays.problem;
  if (problem.buffers.empty()) {
    out.row_text = "nothing on the device to place";
    return out;
  }
  // Aligned as PyTorch's CPU allocator aligns (64 bytes), so that kernels
  // see the addresses eager gives them and scratch packs into a workspace;
  // byte-aligned only when that does not fit the budget.
  problem.alignment = 64;
  validate_problem(problem);
  LayoutRun run = run_layout(problem, "default", time_limit);
  if (!run.fits()) {
    problem.alignment = 1;
    run = run_layout(problem, "default", time_limit);
  }
  out.alignment = problem.alignment;
  out.seconds = run.seconds;
  if (run.layout) out.arena = run.layout->arena;
  const double ratio =
      out.live_peak == 0 ? 0 : static_cast<double>(out.arena) / static_cast<double>(out.live_peak);
  if (!run.fits()) {
    out.row_text = fmt::format(
        "none within the budget: the best arena, {}, is {:.4f}x the live peak (Note [Plans "
        "laid out by default])",
        run.layout ? human_bytes(out.arena) : std::string("none found"), ratio);
    return out;
  }
  Plan pinned = pin_stay_offsets(out.plan, stays, *run.layout, sim.residencies);
  const SimResult check = simulate(graph, pinned, hw, {.record_curves = false});
  if (!check.valid) fail("internal error: the simulator rejects the pinned plan: {}", check.reason);
  out.plan = std::move(pinned);
  out.pinned = true;
  out.row_text = fmt::format(
      "arena {} = {:.4f}x the live peak ({} buffers, {} of them moving between stays; {} "
      "workspaces; {}-byte aligned; {})",
      human_bytes(out.arena), ratio, grouped(out.plan.offsets.size()),
      grouped(out.plan.stay_offsets.size()), grouped(out.plan.workspace_offsets.size()),
      out.alignment, human_seconds(out.seconds));
  return out;
}

nlohmann::json layout_json(const PlanLayout& laid) {
  const double ratio = laid.live_peak == 0
                           ? 0
                           : static_cast<double>(laid.arena) / static_cast<double>(laid.live_peak);
  return {{"pinned", laid.pinned},
          {"arena_bytes", laid.arena},
          {"live_peak_bytes", laid.live_peak},
          {"arena_over_live_peak", ratio},
          {"alignment", laid.alignment},
          {"seconds", laid.seconds}};
}

}  // namespace memwall::cli
