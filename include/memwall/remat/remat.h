// Rematerialization planners (issue 5): each reads a Graph, a Hardware
// profile and a device budget and returns a Plan that drops activations and
// recomputes them. The simulator, not the planner, says whether the plan is
// valid, fits the budget, and what it costs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

struct RematOptions {
  // Wall-clock seconds the call may take: it returns within them plus a
  // small margin (Note [Time limits are wall time], docs/planner.md).
  double time_limit = 10;
  uint64_t seed = 0;  // for planners with randomness
  // Rotor's chain is merged down to at most this many stages (its DP takes
  // O(stages^3) time: 128 stages take about 1.7 s here).
  size_t rotor_stages = 128;
  // Rotor frees a stage's input after its last forward where no backward
  // reads it (Note [Inputs freed after their last forward] in rotor.cc);
  // memwall's planner sets it for one of its two Rotor proposers, the
  // baseline keeps the paper's model. With it, Rotor declines a chain with
  // no such stage (it would plan as without).
  bool rotor_frees_inputs = false;
  // Checkmate on the op graph starts CBC from this plan's compute and
  // recompute sequence when it fits the MILP's accounting (memwall's
  // planner passes its best plan so far). Not owned.
  const Plan* warm_start = nullptr;
  // memwall's planner runs Checkmate's MILP below the lowest budget its
  // other proposers reach (its floor search and budgets under its floor;
  // Note [Checkmate as a proposer] in memwall.cc), at 1.7 CPU seconds a
  // call. The automatic planner, which runs memwall's planner once per
  // configuration within one time limit, turns it off.
  bool memwall_checkmate_below_floor = true;
  // Checkmate: CBC's own limit in CPU seconds of its process (timeMode
  // cpu), for the same answer on a loaded machine; 0: a share of the wall
  // time left. Past time_limit CBC is stopped all the same (Note [Hard
  // deadline] in cbc_process.cc).
  double cpu_time_limit = 0;
};

struct RematResult {
  Plan plan;
  std::string planner;          // the registry name of the planner
  bool proven_optimal = false;  // optimal for the planner's own model of cost
  double gap = 0;               // relative MILP gap when known (0: none or closed)
  double solve_seconds = 0;     // wall time spent planning
  // The simulator's figures for `plan` (from require_fit, without a budget
  // limit): its device peak and iteration time.
  uint64_t simulated_peak = 0;
  double simulated_time = 0;
  std::string note;  // one line: what was chosen (checkpoints, threshold, ...)
};

// A planner returns a plan the simulator accepts within `budget` device
// bytes (it checks with require_fit before returning), or throws Error when
// its method cannot reach the budget; the message names the smallest peak it
// can reach when known. The plan's `budget` field is `budget`.
using RematFn = RematResult (*)(const Graph& graph, const Hardware& hardware, uint64_t budget,
                                const RematOptions& options);

struct RematPlanner {
  std::string_view name;     // e.g. "chen-sqrt"
  std::string_view summary;  // one line, for listings
  RematFn fn = nullptr;
};

// Every registered planner, in display order (src/remat/registry.cc).
std::span<const RematPlanner> remat_planners();
// nullptr for an unknown name.
const RematPlanner* find_remat_planner(std::string_view name);

// ---- Planners (one source file each) -----------------------------------------
// keep_all.cc: the default plan, nothing recomputed.
RematResult plan_keep_all(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const RematOptions& options);
// per_layer.cc: keep each transformer layer's / CNN block's input, recompute
// the layer in backward (Megatron-LM, Hugging Face gradient checkpointing).
RematResult plan_per_layer(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options);
// chen_sqrt.cc: Chen et al. 2016, sqrt(n) segmentation of the forward's
// candidate checkpoints; chen_greedy.cc: the budget-driven greedy variant
// (both through checkpoints.cc).
RematResult plan_chen_sqrt(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options);
RematResult plan_chen_greedy(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& options);
// selective.cc: Korthikanti et al. 2022, recompute only attention's s x s part.
RematResult plan_selective(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options);
// selective_op.cc: torchtitan's op-level selective checkpointing: per
// layer, keep the matmul outputs but every second one and the fused
// attention outputs, recompute the rest.
RematResult plan_selective_op(const Graph& graph, const Hardware& hardware, uint64_t budget,
                              const RematOptions& options);
// rotor*.cc: optimal checkpointing of the linearized chain by dynamic
// programming (Beaumont et al., Rotor).
RematResult plan_rotor(const Graph& graph, const Hardware& hardware, uint64_t budget,
                       const RematOptions& options);
// checkmate*.cc: Jain et al. 2020, the MILP over R, S, FREE solved with CBC
// under options.time_limit.
RematResult plan_checkmate(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options);
// Whether this build has CBC (MEMWALL_HAVE_CBC; Note [Builds without CBC] in
// cbc_process.cc): without it plan_checkmate refuses in one line and the
// memwall planner leaves Checkmate out of its proposers.
bool cbc_available();
// dtr*.cc: Kirisame et al. 2021, Dynamic Tensor Rematerialization: run the
// ops in order, recompute missing inputs on demand, evict by a heuristic
// when an op would exceed the budget (h_DTR, its equivalence-class
// approximation, least recently used, largest first).
RematResult plan_dtr(const Graph& graph, const Hardware& hardware, uint64_t budget,
                     const RematOptions& options);
RematResult plan_dtr_eqclass(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& options);
RematResult plan_dtr_lru(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const RematOptions& options);
RematResult plan_dtr_largest(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& options);

// ---- memwall's own planner (src/remat/memwall*.cc, docs/remat-memwall.md) -----
RematResult plan_memwall(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const RematOptions& options);

// What `op` holds on the device while it runs: its inputs, in-place
// updates and outputs, each once (an output that takes over the storage of
// the version it reads counts once, Note [Buffer versions]), split into
// persistent buffers (param, optim_state) and the rest, which includes the
// workspace span.
struct OpWorkingSet {
  uint64_t transient = 0;
  uint64_t persistent = 0;
};
OpWorkingSet op_working_set(const Graph& graph, const Op& op);

// A proven lower bound on the device budget of any plan that keeps the
// model states (param, optim_state) on the device, as every
// rematerialization plan does: while an op runs, its inputs, in-place
// updates, outputs and workspace are all resident beside them. No plan fits
// below `bytes`; whether one fits at it is not claimed.
struct RematBound {
  uint64_t bytes = 0;
  std::string why;  // the op that needs it and what it holds
};
RematBound remat_lower_bound(const Graph& graph);

// The lowest device budget memwall's planner reaches (Note [Floor search]
// in memwall.cc): the lowest peak of a plan its proposers were seen to
// produce, `plan`, which fits exactly `bytes`. plan_memwall finds a plan at
// every budget from `bytes` up; below it, down to bound.bytes, a plan may
// exist that its search did not find, so `bytes` is not a proven minimum.
// `why`: one line naming the op at the peak and the bytes by kind resident
// then (for "budget too small" messages). The search takes at most
// options.time_limit (wall seconds, plus the cost of one proposer call);
// stopped there, the floor is the lowest peak reached by then (cut_short).
struct RematFloor {
  uint64_t bytes = 0;
  std::string why;
  Plan plan;  // budget: bytes
  RematBound bound;
  bool cut_short = false;
};
RematFloor remat_floor(const Graph& graph, const Hardware& hardware, const RematOptions& options);

}  // namespace memwall
