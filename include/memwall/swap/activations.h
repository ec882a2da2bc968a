// Activation swapping (issue 6): planners that move saved activations to the
// host (or NVMe) between their forward and backward uses, and the swap
// scheduler they share, which decides when each transfer is issued. As in
// remat, the simulator, not the planner, says whether a plan is valid, fits
// the budget, and what it costs (docs/swap-scheduler.md, docs/swap-vdnn.md,
// docs/swap-capuchin.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

struct SwapOptions {
  double time_limit = 10;   // seconds of planning (selection loops and scheduler repairs)
  Tier tier = Tier::kHost;  // where swapped activations go: host or nvme
  // Capuchin: also consider recomputation (its hybrid policy); false: swap only.
  bool allow_recompute = true;
  // Capuchin with tier host: the host memory its swaps may use; the swaps
  // beyond it go to NVMe (Note [Host, then NVMe] in capuchin.cc). nullopt:
  // every swap goes to `tier`.
  std::optional<uint64_t> host_swap_bytes;
};

struct SwapResult {
  Plan plan;
  std::string planner;  // the registry name of the planner
  // The simulator's figures for `plan` (from swap_require_fit): its device
  // peak (buffers in flight included), iteration time and bytes copied out
  // of the device.
  uint64_t simulated_peak = 0;
  double simulated_time = 0;
  uint64_t bytes_swapped_out = 0;
  size_t swapped = 0;     // evictions swapped out and back in
  size_t recomputed = 0;  // evictions dropped and recomputed
  double solve_seconds = 0;
  std::string note;  // one line: what was chosen
};

// ---- The swap scheduler (swap_scheduler.cc, docs/swap-scheduler.md) -------------

struct SwapScheduleOptions {
  double time_limit = 10;  // seconds; the repair loop stops there (see the Note)
};

struct SwapSchedule {
  // The evictions given, each swap with its prefetch point decided, in the
  // order the plan issues their prefetches.
  std::vector<Eviction> evictions;
  Plan plan;          // plan_with_evictions of `evictions`; its budget is the one given
  SimResult sim;      // the simulation of `plan` without a budget limit
  bool fits = false;  // the simulator accepts `plan` within the budget
  // The device peak of the swap set with every prefetch just in time (the
  // least memory any placement of these prefetches can use).
  uint64_t just_in_time_peak = 0;
  size_t repairs = 0;  // prefetches moved later after a simulation went over budget
};

// Decides when each swap of `evictions` is brought back (see Note [Swap
// scheduling] in swap_scheduler.cc): swap-outs go right after the last use
// before their gap; each prefetch is issued as early as its earliest point
// (the eviction's `prefetch_after`, kNoOp: `after`) and the device memory
// allow, buffers in flight included, so that its transfer overlaps compute
// on the copy engine. Recompute evictions pass through unchanged. `fits` is
// false when even just-in-time prefetches exceed the budget. Throws Error
// for evictions that do not fit the graph (plan_with_evictions' checks) or a
// swap to the device.
SwapSchedule schedule_swaps(const Graph& graph, const Hardware& hardware, uint64_t budget,
                            std::span<const Eviction> evictions,
                            const SwapScheduleOptions& options = {});

// ---- Planners (one source file each) ---------------------------------------------
// A planner returns a plan the simulator accepts within `budget` (it checks
// with swap_require_fit before returning), or throws Error "<planner>: ..."
// naming the peak it reached and by how much it missed.
using SwapFn = SwapResult (*)(const Graph& graph, const Hardware& hardware, uint64_t budget,
                              const SwapOptions& options);

struct SwapPlanner {
  std::string_view name;     // e.g. "vdnn"
  std::string_view summary;  // one line, for listings
  SwapFn fn = nullptr;
};

// Every registered planner, in display order (src/swap/registry.cc).
std::span<const SwapPlanner> swap_planners();
// nullptr for an unknown name.
const SwapPlanner* find_swap_planner(std::string_view name);

// vdnn.cc: vDNN (Rhu et al. 2016) on the op graph: every forward op's inputs
// that are saved for backward are offloaded after their last forward use
// and prefetched one offloaded layer ahead in backward; vdnn-conv offloads
// only the inputs of convolutions. A static policy: the budget only decides
// whether the plan is accepted.
SwapResult plan_vdnn(const Graph& graph, const Hardware& hardware, uint64_t budget,
                     const SwapOptions& options);
SwapResult plan_vdnn_conv(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const SwapOptions& options);

// capuchin.cc: Capuchin (Peng et al. 2020): from the access timeline of the
// keep-all run, evict saved activations (read_again_later) spanning the
// peak until it fits:
// swaps whose transfers hide in their free time first (largest free time
// first, copy engines shared), then swap or recompute, whichever saves the
// most memory per second of overhead.
SwapResult plan_capuchin(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const SwapOptions& options);

// The forward ops' inputs that vDNN offloads, in buffer order: activations
// saved for backward read by a forward op (a convolution when conv_only),
// whose gap from their last forward use to their next use spans at least
// two ops; in a forward-only program, those read again after a gap
// (read_again_later), across their largest one. Shared by the planner and
// its tests.
std::vector<BufferId> vdnn_offloaded(const Graph& graph, bool conv_only);

// True for a forward op that is a convolution (type conv2d, conv_transpose2d, ...).
bool is_convolution(const Op& op);

}  // namespace memwall
