// memwall's default layout algorithm: the greedy heuristics, then the exact
// solver seeded with the best of them for the rest of a time budget. See
// Note [The default layout] in src/layout/default_layout.cc.
#pragma once

#include <cstdint>
#include <string>

#include "memwall/layout/types.h"

namespace memwall {

struct DefaultOptions {
  double time_budget = 1.0;  // CPU seconds for the whole call (Note [CPU-time budgets])
};

struct DefaultLayoutResult {
  Layout layout;
  // Who found the layout: a heuristic's name (heuristics.h), or "exact"
  // when the search improved on every heuristic.
  std::string algorithm;
  std::string best_heuristic;    // the best heuristic, whoever won
  uint64_t heuristic_arena = 0;  // its arena
  // No layout has a smaller arena; equal to the layout's when it is optimal.
  uint64_t lower_bound = 0;
  bool optimal = false;
  double seconds = 0;

  // Proven relative gap: arena / lower_bound - 1 (0 when optimal).
  double gap() const;
};

// Minimizes the arena. When the problem has a capacity that the best
// heuristic exceeds, the exact solver first decides that capacity, then
// minimizes below it with the time left; check_layout tells whether the
// result fits. Throws Error on an invalid problem
// (validate_problem). The arena is never above the best heuristic's.
DefaultLayoutResult solve_default_layout(const LayoutProblem& problem,
                                         const DefaultOptions& options = {});

// solve_default_layout(problem, options).layout.
Layout default_layout(const LayoutProblem& problem, const DefaultOptions& options = {});

}  // namespace memwall
