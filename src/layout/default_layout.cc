// memwall's default layout (default_layout.h).
//
// Note [The default layout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The greedy heuristics are fast (O(n log n) plus the conflicts they place)
// and each is best on some inputs, so all of them run and the best arena
// wins. Whatever time is left goes to the exact solver, minimizing from that
// layout (Note [Minimizing the arena] in exact.cc): on the inputs where a
// greedy leaves fragmentation it usually finds a layout at or near the live
// lower bound, and when it cannot improve, the heuristic's layout stands.
// The exact solver also stacks buffers that span whole stretches of time
// and solves independent stretches separately (Note [Decomposition]), which
// is where most of its gains on training graphs come from.
#include "memwall/layout/default_layout.h"

#include <algorithm>
#include <chrono>

#include "memwall/layout/exact.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"
#include "memwall/layout/solver_clock.h"

namespace memwall {

double DefaultLayoutResult::gap() const {
  if (lower_bound == 0) return 0;
  return static_cast<double>(layout.arena) / static_cast<double>(lower_bound) - 1;
}

DefaultLayoutResult solve_default_layout(const LayoutProblem& problem,
                                         const DefaultOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  const auto start = SolverClock::now();  // Note [CPU-time budgets]
  validate_problem(problem);
  DefaultLayoutResult result;
  result.lower_bound = arena_lower_bound(problem);

  bool first = true;
  for (const LayoutHeuristic& heuristic : layout_heuristics()) {
    // "best-fit" is the better of the two best-fit orders, both run anyway.
    if (heuristic.name == "best-fit") continue;
    Layout layout = heuristic.run(problem);
    if (first || layout.arena < result.layout.arena) {
      result.layout = std::move(layout);
      result.algorithm = heuristic.name;
      first = false;
    }
  }
  result.best_heuristic = result.algorithm;
  result.heuristic_arena = result.layout.arena;

  // The search stops at its limit within a few milliseconds (one node, the
  // final copy of the layout); 2% of the budget is kept for that.
  const auto time_left = [&] {
    return 0.98 * options.time_budget -
           std::chrono::duration<double>(SolverClock::now() - start).count();
  };
  // A capacity to meet is decided first, with all the time there is: a
  // minimization spreads its time over a descent of capacities and can stop
  // above this one (Note [Minimizing the arena]). Fitting is what the caller
  // needs; when the decision runs out of time, the best heuristic's layout
  // stands (measured on MiniMalloc's B: deciding fits in 1 s, a minimization
  // stops 5% above).
  if (problem.capacity > 0 && result.layout.arena > problem.capacity && time_left() > 0) {
    ExactResult fit =
        solve_exact(problem, {.capacity = problem.capacity, .time_limit = time_left()});
    result.lower_bound = std::max(result.lower_bound, fit.best_lower_bound);
    if (fit.layout) {
      result.layout = std::move(*fit.layout);
      result.algorithm = "exact";
    }
  }
  const double search_time = time_left();
  if (result.layout.arena > result.lower_bound && search_time > 0) {
    // Minimize: the capacity plays no part (ExactOptions::capacity).
    LayoutProblem unbounded = problem;
    unbounded.capacity = 0;
    ExactResult exact = solve_exact(unbounded, {.time_limit = search_time, .start = result.layout});
    result.lower_bound = std::max(result.lower_bound, exact.best_lower_bound);
    if (exact.layout && exact.layout->arena < result.layout.arena) {
      result.layout = std::move(*exact.layout);
      result.algorithm = "exact";
    }
  }
  result.optimal = result.layout.arena <= result.lower_bound;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

Layout default_layout(const LayoutProblem& problem, const DefaultOptions& options) {
  return solve_default_layout(problem, options).layout;
}

}  // namespace memwall
