// Runs one layout algorithm by name, for `memwall layout` and
// `memwall bench layout`: the greedy heuristics, the exact solver and
// memwall's default, with the figures both verbs print.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/types.h"
#include "memwall/plan/plan.h"

namespace memwall::cli {

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

// Note [Plans laid out by default]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `memwall plan --out` pins every device buffer and every op's workspace
// to an offset in an arena of the plan's budget (unless --no-layout), so
// that `memwall run` executes it on the plan allocator: no fragmentation,
// and the device memory the run uses is the arena. The lifetimes are the
// simulator's (plan_layout_problem), the layout memwall's default, and the
// pinned plan is simulated again before it is written. A plan pins one
// offset per buffer for its whole life, so a buffer that leaves the device
// and comes back holds its range in between: when no layout of the plan
// fits its budget the plan is written without offsets, and runs on the
// stitching allocator; the row says so.
struct PlanLayout {
  Plan plan;  // with offsets when `pinned`
  bool pinned = false;
  uint64_t arena = 0;       // the layout's arena (0: none)
  uint64_t live_peak = 0;   // the simulator's device peak
  double seconds = 0;       // the layout's time
  uint64_t alignment = 64;  // of every offset: 64, or 1 when only that fits
  std::string row_text;     // "arena ... = 1.0000x the live peak", or why not
};
PlanLayout lay_out_plan(const Plan& plan, const Graph& graph, const Hardware& hw,
                        double time_limit = 1.0);
// {"pinned", "arena_bytes", "live_peak_bytes", "arena_over_live_peak", "seconds"}.
nlohmann::json layout_json(const PlanLayout& laid);

}  // namespace memwall::cli
