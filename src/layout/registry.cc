// The layout algorithms by name (registry.h).
#include "memwall/layout/registry.h"

#include <algorithm>

#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/layout/default_layout.h"
#include "memwall/layout/exact.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"

namespace memwall {

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
  const Stopwatch clock;
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
  run.seconds = clock.seconds();
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

}  // namespace memwall
