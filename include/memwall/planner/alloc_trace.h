// Allocation traces for `memwall alloc-replay` and `memwall bench alloc`:
// the device allocations and frees of a graph's default schedule, of a
// simulated plan or of a lifetimes CSV, turned into events for
// alloc::replay, with the static layout that the "plan" policy places them by.
//
// The alloc module depends on nothing (DESIGN.md), so this glue lives with
// the planner, which reaches the allocator to judge whether a plan runs
// (Note [Plans that run] in runnable_plan.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/replay.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/types.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

struct AllocTrace {
  std::string name;  // what is replayed, for reports
  // One allocation each, live on [lower, upper) in the trace's integer time;
  // allocation i is event id i. `id` is the source's name for it (buffer id
  // or CSV id). Zero-byte allocations are left out.
  std::vector<LayoutBuffer> allocations;
  // The static layout the "plan" policy uses: allocations[i] sits at
  // layout.offsets[group[i]] of an arena of layout.arena bytes. A plan keeps
  // one address per buffer, so all stays of a buffer share a group.
  LayoutProblem layout_problem;
  std::vector<size_t> group;
  std::optional<Layout> layout;  // set by add_layout or taken from the input
  std::string layout_source;     // who made it, for reports
};

// The default schedule (graph.h liveness): every buffer of the graph from its
// allocation to its free (persistent ones from 0 to the op count), plus each
// op's workspace during the op, so that the most bytes live at once equal
// memory_profile(graph).peak_bytes. Times are op indices.
AllocTrace graph_alloc_trace(const Graph& graph);

// Every stay of a buffer in device memory that the simulation of a plan
// recorded (SimOptions::record_residency; times are the simulator's sequence
// numbers). Workspace is not recorded by the simulator and is left out. When
// the plan pins offsets, they are its layout.
AllocTrace plan_alloc_trace(const Graph& graph, const Plan& plan, const SimResult& sim);

// The rows of a lifetimes CSV; its offset column, if any, is the layout.
AllocTrace csv_alloc_trace(const LayoutCsv& csv, std::string name);

// Solves the layout with memwall's default layout algorithm when the trace
// has none (default_layout.h, `seconds` of wall clock).
void add_layout(AllocTrace& trace, double seconds);

// Allocations and frees in time order; at equal times frees come first, as
// a buffer freed after op t-1 makes room for op t's outputs.
std::vector<alloc::ReplayEvent> replay_events(const AllocTrace& trace);

// The "plan" policy's options for the trace's layout (add_layout first):
// arena_bytes and one offset per event id.
alloc::Options plan_policy_options(const AllocTrace& trace);

// The most bytes live at once: a lower bound on any policy's peak.
uint64_t peak_live_bytes(const AllocTrace& trace);

// One policy's replay of a trace on a simulated device of `capacity` bytes
// (alloc::make_sim_device). When it runs out of memory, the replay is run
// again without a limit to learn what the policy would have reserved.
struct PolicyReplay {
  std::string policy;
  uint64_t capacity = 0;
  alloc::ReplayResult result;
  uint64_t unlimited_peak_reserved = 0;  // the peak reserved with no capacity limit
};
// `options` is the policies' tuning (max_split_size); the "plan" policy's
// arena and offsets come from the trace's layout (add_layout first).
PolicyReplay replay_policy(const AllocTrace& trace, std::string_view policy, uint64_t capacity,
                           const alloc::Options& options = {},
                           uint64_t granularity = alloc::kDefaultGranularity);
// The same with the trace's replay_events given: callers replaying several
// policies sort the events once.
PolicyReplay replay_policy(const AllocTrace& trace, const std::vector<alloc::ReplayEvent>& events,
                           std::string_view policy, uint64_t capacity,
                           const alloc::Options& options = {},
                           uint64_t granularity = alloc::kDefaultGranularity);

// What a replay through several policies runs on (`memwall alloc-replay`
// and `memwall bench alloc`, whose flags set it).
struct AllocSetup {
  std::vector<std::string> policies;
  uint64_t capacity = 0;
  std::string capacity_source;  // where the capacity came from, for reports
  uint64_t granularity = alloc::kDefaultGranularity;
  alloc::Options options;     // max_split_size
  double layout_seconds = 1;  // the plan policy's layout (default_layout.h)
};

// The setup as a person names it: a policy name or "all"; the capacity as
// bytes, "80GiB" or a share of the GPU's memory ("" is all of it); the
// chunk size; PyTorch's max_split_size ("" for none); the plan policy's
// layout time.
struct AllocRequest {
  std::string policy = "all";
  std::string capacity;
  std::string granularity = "2MiB";
  std::string max_split_size;
  double layout_seconds = 1;
};

// The setup `request` names on `hw`. Throws Error naming the option
// (--policy, --capacity, ...) on unknown policies, a chunk size that is not
// a power of two of at least 4096 bytes, a capacity below one chunk, a
// layout time outside (0, 86400].
AllocSetup alloc_setup(const AllocRequest& request, const Hardware& hw);

// One row per policy: peak allocated (the policy's blocks), peak reserved
// and its ratio to `peak_live` (the most bytes requested at once, which no
// policy can go below), fragmentation, the device calls and whether it fits.
std::string replay_table(const std::vector<PolicyReplay>& runs, uint64_t peak_live);

// Each policy of `setup` in turn (adding the trace's layout first when the
// plan policy is among them).
std::vector<PolicyReplay> replay_policies(AllocTrace& trace, const AllocSetup& setup);

// Why no policy can fit the trace, before replaying it: an allocation
// larger than the device (every policy maps at least the request rounded up
// to whole chunks, and the device holds whole chunks), or more than 2^62
// bytes live at once. Nothing when the replay has to tell.
std::optional<std::string> beyond_any_policy(const AllocTrace& trace, const AllocSetup& setup);

}  // namespace memwall
