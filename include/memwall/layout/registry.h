// The layout algorithms by name, beside remat's and swap's registries: the
// greedy heuristics, the exact solver and memwall's default, each run on a
// problem with the figures `memwall layout` and `memwall bench layout`
// print.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/layout/types.h"

namespace memwall {

// "default", then every heuristic (heuristics.h), then "exact".
std::vector<std::string> layout_algorithm_names();

struct LayoutRun {
  std::string algorithm;
  std::string found_by;          // default: the heuristic or "exact" whose layout won
  std::optional<Layout> layout;  // none: the exact solver found none in time
  // The strongest lower bound known: arena_lower_bound, raised by what the
  // exact solver proved (default and exact).
  uint64_t lower_bound = 0;
  bool optimal = false;     // the arena equals a proven lower bound
  bool infeasible = false;  // exact, with a capacity: proven not to fit
  double seconds = 0;
  bool fits_capacity = false;  // set with the layout
  // The layout fits the problem's capacity (always true without one).
  bool fits() const;
  // arena / lower_bound; 0 without a layout.
  double ratio() const;
};

// Runs `algorithm` (layout_algorithm_names) on a validated problem; the
// layout is checked with check_layout, and a failed check (a bug) throws
// Error. The exact solver decides the problem's capacity when it has one and
// minimizes the arena otherwise; the default decides the capacity first when
// the heuristics exceed it (default_layout.h). Throws Error for an unknown
// name.
LayoutRun run_layout(const LayoutProblem& problem, std::string_view algorithm, double time_limit);

}  // namespace memwall
