// Laying out a plan, the second planning pass: the glue between the
// simulator, which knows when each buffer of a plan is in device memory,
// and src/layout, which gives buffers addresses. The layout problem of a
// plan, a plan with a layout's offsets pinned, and a plan laid out in its
// budget by memwall's default layout (Note [Plans laid out by default]).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/types.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// One LayoutBuffer per buffer of non-zero size that the simulated plan ever
// places in device memory (ids are buffer ids). Its lifetime runs from its
// first allocation to its last release in the simulator's sequence numbers
// (Residency): one offset per buffer, so a buffer swapped out and back in,
// or dropped and recomputed, keeps its address in between (what the
// allocation traces of `alloc-replay` use; plans are laid out per stay by
// stay_layout_problem below). Alignment 1; capacity `capacity`.
LayoutProblem plan_layout_problem(const Graph& graph, std::span<const Residency> residencies,
                                  uint64_t capacity);

// `plan` with `offsets` set from `layout` (a layout of `problem`, whose ids
// are buffer ids), and offset 0 for the zero-byte buffers of `residencies`,
// which occupy no address but still need one.
Plan pin_offsets(Plan plan, const Graph& graph, const LayoutProblem& problem, const Layout& layout,
                 std::span<const Residency> residencies);

// Note [Offsets per stay] (plan.h): the layout problem of a plan with an
// address per device stay. One item per stay of a buffer that is not
// persistent state, stays that an in-place step continues
// (Residency::continues) merged into one, so that the new version stays in
// its predecessor's memory, and the first and last stay of persistent state
// that starts on the device and is there at the end (the next iteration
// starts where this one ends); one per device run of an op with a
// workspace.
// Items of zero bytes are left out. Alignment 1; capacity `capacity`.
struct StayLayoutProblem {
  LayoutProblem problem;              // ids: item indices
  std::vector<int64_t> item_of_stay;  // per residency: index into problem.buffers, -1: none
  std::vector<OpId> workspace_of;     // per item: the op whose workspace it is, or -1
};
StayLayoutProblem stay_layout_problem(const Graph& graph, const Plan& plan,
                                      std::span<const Residency> residencies,
                                      std::span<const Residency> workspaces, uint64_t capacity);
// `plan` with offsets, stay offsets and workspace offsets from `layout`, a
// layout of `stays.problem`; zero-byte stays at offset 0.
Plan pin_stay_offsets(Plan plan, const StayLayoutProblem& stays, const Layout& layout,
                      std::span<const Residency> residencies);

// `plan` with the offsets of `layout` (what `memwall layout --out
// FILE.json` writes), simulated again: throws Error when the simulator
// rejects the pinned plan (a bug). With `stays` (the plan's
// stay_layout_problem), `layout` lays out stays->problem and `residencies`
// are the stays it was made from; without, `layout` lays out `problem`, one
// item per buffer (plan_layout_problem, or the default schedule's
// layout_problem), and `residencies`, when empty, come from simulating
// `plan`.
Plan pin_layout(const Graph& graph, const Plan& plan, const Hardware& hw,
                const LayoutProblem& problem, const Layout& layout, const StayLayoutProblem* stays,
                std::span<const Residency> residencies);

// A plan file of `graph`, checked against it and simulated with every
// device stay recorded; throws Error naming the file when it does not
// belong to the graph or the simulator rejects it. `drop_offsets`: the
// plan's own offsets are removed first (a caller about to replace them).
struct SimulatedPlan {
  Plan plan;
  SimResult sim;
};
SimulatedPlan simulate_plan_file(const std::string& path, const Graph& graph, const Hardware& hw,
                                 bool drop_offsets = false);
// The same for a plan already read from `path`.
SimulatedPlan simulate_plan_file(const std::string& path, Plan plan, const Graph& graph,
                                 const Hardware& hw, bool drop_offsets = false);

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

}  // namespace memwall
