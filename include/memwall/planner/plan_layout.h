// The glue between the simulator, which knows when each buffer of a plan is
// in device memory, and src/layout, which gives buffers addresses: the
// layout problem of a plan, and a plan with a layout's offsets pinned.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
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

}  // namespace memwall
